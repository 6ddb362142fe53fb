/**
 * One Versus API as a child process, for tests that need several replicas sharing one Redis
 * or a real signal:
 *
 *   REDIS_URL=… VERSUS_KEY_PREFIX=… VERSUS_TEST_CLOCK=1 LOG_LEVEL=silent \
 *     node --import tsx test/helpers/api-process.ts
 *
 * It runs `versus serve`'s own code (runServe), so SIGTERM and SIGINT get the production
 * shutdown: stop accepting, finish in-flight requests, close Redis, exit 0. It prints exactly
 * one line `LISTENING <url>` on stdout once it accepts connections. With
 * VERSUS_EXIT_WITH_PARENT=1 (set by spawnApi) it also stops when its stdin closes, so a test
 * runner that dies without stopping it does not leave it running.
 */
import { loadConfig } from '../../src/config.js';
import { runServe } from '../../src/http/server.js';

const running = await runServe(loadConfig(), 'api', { port: 0, host: '127.0.0.1' });
process.stdout.write(`LISTENING ${running.url}\n`);

if (process.env['VERSUS_EXIT_WITH_PARENT'] === '1') {
  const stop = () => process.kill(process.pid, 'SIGTERM');
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  process.stdin.resume();
}
