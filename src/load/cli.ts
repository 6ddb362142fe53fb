import { LOAD_USAGE, parseLoadArgs } from './options.js';
import { formatProgress, formatReport } from './report.js';
import { runLoad } from './runner.js';

/**
 * `versus load …`: parses flags (LoadUsageError on a bad one), runs, and prints the report on
 * stdout (one JSON object with --json). Progress goes to stderr once a second: one line
 * rewritten in place on a terminal, plain lines otherwise, nothing with --json. The first
 * Ctrl-C ends the run early and still reports; a second one exits at once.
 */
export async function runLoadCommand(args: string[]): Promise<void> {
  const parsed = parseLoadArgs(args);
  if (parsed.help) {
    process.stdout.write(`${LOAD_USAGE}\n`);
    return;
  }
  const { options } = parsed;
  const tty = process.stderr.isTTY === true;
  let progressShown = false;
  const stop = new AbortController();
  const onSigint = (): void => {
    if (stop.signal.aborted) process.exit(130);
    stop.abort();
  };
  process.on('SIGINT', onSigint);
  try {
    const report = await runLoad(options, {
      signal: stop.signal,
      ...(options.json
        ? {}
        : {
            onProgress: (snapshot) => {
              const line = formatProgress(snapshot);
              process.stderr.write(tty ? `\r${line}\x1b[K` : `${line}\n`);
              progressShown = true;
            },
          }),
    });
    if (tty && progressShown) process.stderr.write('\n');
    process.stdout.write(options.json ? `${JSON.stringify(report)}\n` : formatReport(report));
  } catch (error) {
    if (tty && progressShown) process.stderr.write('\n');
    throw error;
  } finally {
    process.off('SIGINT', onSigint);
  }
}
