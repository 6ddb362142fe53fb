# syntax=docker/dockerfile:1
# Build stage: compile TypeScript to dist/. Dependency install scripts are not needed to run
# tsc (and would try to compile native addons of dev-only packages without a toolchain).
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Runtime stage: production dependencies only (a fresh `npm ci --omit=dev`, nothing from the
# build stage's node_modules), the compiled code, package.json ("type": "module" makes dist/
# ESM) and the Lua scripts, which are read at run time from <package root>/lua (here /app/lua).
# No sources, tests or dev tools. Of the production dependencies only msgpackr-extract (under
# bullmq) has an install script; skipping it is fine: its prebuilt binary comes as an optional
# package, and msgpackr falls back to plain JavaScript without it. Files stay owned by root and
# read-only to the `node` user the process runs as.
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY lua ./lua
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["serve", "--role", "api"]
