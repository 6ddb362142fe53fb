/**
 * The real API for the HTTP benchmark, in its own process: `startServer` from src/http/server.ts
 * with the configuration in the environment (run.ts sets the bench's key prefix, LOG_LEVEL=silent,
 * HOST=127.0.0.1, PORT=0). Prints one JSON line `{"url": ...}` when it listens; SIGTERM closes it.
 */
import { loadConfig } from '../src/config.js';
import { startServer } from '../src/http/server.js';

const server = await startServer(loadConfig(process.env));
process.stdout.write(`${JSON.stringify({ url: server.url })}\n`);
process.once('SIGTERM', () => {
  server.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
});
