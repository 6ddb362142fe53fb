import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/processes.js';

/**
 * `versus/client` ships as dist/client with declarations and pulls in no server code: only
 * src/client, the pure modules of src/shared, and jose, bs58, tweetnacl and node: builtins.
 */

const ALLOWED_PACKAGES = new Set(['jose', 'bs58', 'tweetnacl']);
const outDir = mkdtempSync(path.join(tmpdir(), 'versus-client-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));

function files(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : files(full, base);
    return [path.relative(base, full).split(path.sep).join('/')];
  });
}

describe('the client package', () => {
  it('imports only src/client, src/shared and its three npm packages', () => {
    const seen = new Set<string>();
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const source = readFileSync(file, 'utf8');
      for (const [, specifier] of source.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'/gm)) {
        if (specifier!.startsWith('.')) {
          const target = path.resolve(path.dirname(file), specifier!.replace(/\.js$/, '.ts'));
          const relative = path.relative(REPO_ROOT, target).split(path.sep).join('/');
          expect(relative, `${file} imports ${specifier}`).toMatch(/^src\/(client|shared)\//);
          visit(target);
        } else if (!specifier!.startsWith('node:')) {
          expect(ALLOWED_PACKAGES.has(specifier!), `${file} imports the package ${specifier}`).toBe(true);
        }
      }
    };
    visit(path.join(REPO_ROOT, 'src/client/index.ts'));
    expect([...seen].some((file) => file.includes(`${path.sep}shared${path.sep}`))).toBe(true);
  });

  it('builds on its own into client/ (with .d.ts) and shared/, and the built module works', async () => {
    const config = ts.getParsedCommandLineOfConfigFile(path.join(REPO_ROOT, 'tsconfig.build.json'), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
    const program = ts.createProgram([path.join(REPO_ROOT, 'src/client/index.ts')], { ...config.options, outDir, rootDir: path.join(REPO_ROOT, 'src'), sourceMap: false });
    const result = program.emit();
    const diagnostics = ts.getPreEmitDiagnostics(program).concat(result.diagnostics);
    expect(diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual([]);

    const emitted = files(outDir);
    expect(emitted.every((file) => /^(client|shared)\//.test(file))).toBe(true);
    expect(emitted).toContain('client/index.js');
    expect(emitted).toContain('client/index.d.ts');
    const declarations = readFileSync(path.join(outDir, 'client/index.d.ts'), 'utf8');
    expect(declarations).toContain('createMatchmaking');
    expect(declarations).toContain('TicketInput');

    symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(outDir, 'node_modules'), 'dir');
    const client = (await import(pathToFileURL(path.join(outDir, 'client/index.js')).href)) as typeof import('../../src/client/index.js');
    expect(Object.keys(client).sort()).toEqual(['MATCHMAKING_LIMITS', 'MatchmakingError', 'NOTIFICATION_LIMITS', 'PushError', 'createMatchmaking', 'notifyAudience', 'notifyUser']);
    const matchmaking = client.createMatchmaking({ origin: 'https://game.example', key: '' });
    await expect(matchmaking.listTickets()).rejects.toMatchObject({ name: 'MatchmakingError', code: 'unauthenticated', status: null });
  }, 60_000);

  it('package.json exports ./client from dist/client with its types', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    expect(pkg.exports['./client']).toEqual({ types: './dist/client/index.d.ts', default: './dist/client/index.js' });
  });
});
