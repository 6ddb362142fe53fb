/**
 * One Versus worker (`versus serve --role worker`'s code, runServe) as a child process:
 *
 *   node --import tsx test/push/support/worker-process.ts '<tuning JSON>' [worker|all]
 *
 * The environment is its configuration (VAPID keys, PUSH_ENDPOINT_HOSTS, and
 * NODE_EXTRA_CA_CERTS to trust the test push service's certificate, read at process start).
 * The optional argument shortens the job lock so a crash is recovered quickly. It prints
 * `LISTENING <url>` once /healthz and /readyz answer, and exits when its stdin closes.
 */
import { loadConfig } from '../../../src/config.js';
import { runServe } from '../../../src/http/server.js';

const tuning = process.argv[2] ? JSON.parse(process.argv[2]) : {};
const role = process.argv[3] === 'all' ? 'all' : 'worker';
const running = await runServe(loadConfig(), role, { port: 0, host: '127.0.0.1', pushWorker: tuning });
process.stdout.write(`LISTENING ${running.url}\n`);
const stop = () => process.kill(process.pid, 'SIGTERM');
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
