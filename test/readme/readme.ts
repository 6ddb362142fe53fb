import { spawnSync } from 'node:child_process';

/**
 * Reading README.md the way a newcomer does: its `## ` sections, their fenced blocks, the shell
 * statements of a `sh` block with the answers documented after them (`# -> …`), and the `…`
 * that shortens a documented value.
 */

export interface Fence {
  /** The info string: `sh`, `text`, `ts`, or '' for a bare fence. */
  info: string;
  text: string;
}

/** The body of the level-2 section with this heading (up to the next level-2 heading); throws when missing. */
export function section(markdown: string, heading: string): string {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line === `## ${heading}`);
  if (start < 0) throw new Error(`README.md has no section "## ${heading}"`);
  let end = start + 1;
  let inFence = false;
  for (; end < lines.length; end++) {
    if (lines[end]!.startsWith('```')) inFence = !inFence;
    if (!inFence && lines[end]!.startsWith('## ')) break;
  }
  return lines.slice(start + 1, end).join('\n');
}

/** The fenced blocks of a section, in order. */
export function fences(body: string): Fence[] {
  const found: Fence[] = [];
  let open: { info: string; lines: string[] } | null = null;
  for (const line of body.split('\n')) {
    if (open === null) {
      const match = /^```(\S*)\s*$/.exec(line);
      if (match) open = { info: match[1]!, lines: [] };
    } else if (line.startsWith('```')) {
      found.push({ info: open.info, text: open.lines.join('\n') });
      open = null;
    } else {
      open.lines.push(line);
    }
  }
  if (open !== null) throw new Error('README.md: a fenced block is not closed');
  return found;
}

export interface Statement {
  /** The command as written (continuation lines included). */
  command: string;
  /** The documented output lines (`# -> …` right after it), possibly none. */
  expected: string[];
}

/** Whether bash reads `text` as complete commands (no open quote, brace or continuation). */
function complete(text: string): boolean {
  if (/\\\s*$/.test(text)) return false;
  return spawnSync('bash', ['-n'], { input: text, stdio: ['pipe', 'ignore', 'ignore'] }).status === 0;
}

/**
 * A `sh` block as a list of statements. Lines are joined until bash reads them as complete
 * (so a function spread over continuation lines is one statement); comment lines between
 * statements are prose, except `# -> ` lines, which document the previous statement's output.
 */
export function statements(script: string): Statement[] {
  const found: Statement[] = [];
  let pending: string[] = [];
  for (const line of script.split('\n')) {
    if (pending.length === 0) {
      const answer = /^# -> (.*)$/.exec(line);
      if (answer) {
        const last = found[found.length - 1];
        if (!last) throw new Error(`README.md: "${line}" documents no command`);
        last.expected.push(answer[1]!);
        continue;
      }
      if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
    }
    pending.push(line);
    const text = pending.join('\n');
    if (complete(text)) {
      found.push({ command: text, expected: [] });
      pending = [];
    }
  }
  if (pending.length > 0) throw new Error(`README.md: an incomplete shell command:\n${pending.join('\n')}`);
  return found;
}

/** Whether `actual` is the documented line `documented`, where `…` stands for any text (possibly none). */
export function matchesDocumented(documented: string, actual: string): boolean {
  const pattern = documented
    .split('…')
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${pattern}$`, 's').test(actual);
}
