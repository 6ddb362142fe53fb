/**
 * One Versus API as a child process, for tests that need several replicas sharing one Redis:
 *
 *   REDIS_URL=… VERSUS_KEY_PREFIX=… VERSUS_TEST_CLOCK=1 LOG_LEVEL=silent \
 *     node --import tsx test/helpers/api-process.ts
 *
 * Prints exactly one line `LISTENING <url>` on stdout once it accepts connections, and on
 * SIGTERM (or SIGINT) stops accepting, finishes in-flight requests, closes Redis and exits 0.
 * With VERSUS_EXIT_WITH_PARENT=1 (set by spawnApi) it also stops when its stdin closes, so a
 * test runner that dies without stopping it does not leave it running.
 */
import { loadConfig } from '../../src/config.js';
import { startServer } from '../../src/http/server.js';

const running = await startServer(loadConfig(), { port: 0, host: '127.0.0.1' });
process.stdout.write(`LISTENING ${running.url}\n`);

let stopping = false;
function stop(): void {
  if (stopping) return;
  stopping = true;
  const deadline = setTimeout(() => {
    process.stderr.write('api-process: close did not finish within 10 s\n');
    process.exit(1);
  }, 10_000);
  deadline.unref();
  running.close().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`api-process: close failed: ${error instanceof Error ? error.stack : String(error)}\n`);
      process.exit(1);
    },
  );
}

process.once('SIGTERM', stop);
process.once('SIGINT', stop);

if (process.env['VERSUS_EXIT_WITH_PARENT'] === '1') {
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}
