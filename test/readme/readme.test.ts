import { describe, expect, it } from 'vitest';
import { fences, matchesDocumented, section, statements } from './readme.js';

describe('reading README.md', () => {
  it('splits a sh block into statements as bash reads them, with the output documented after each', () => {
    const script = [
      'set -a; . .env; set +a          # a trailing comment',
      'f() { curl -s "$URL" \\',
      '  -H "A: $(echo b)" \\',
      "  -d \"$1\"; echo; }",
      '',
      '# Prose about the next command.',
      "f '{\"a\":1}'",
      '# -> {"ok":true}',
      "echo 'two",
      "lines'",
      '# -> two',
      '# -> lines',
    ].join('\n');
    expect(statements(script)).toEqual([
      { command: 'set -a; . .env; set +a          # a trailing comment', expected: [] },
      { command: 'f() { curl -s "$URL" \\\n  -H "A: $(echo b)" \\\n  -d "$1"; echo; }', expected: [] },
      { command: "f '{\"a\":1}'", expected: ['{"ok":true}'] },
      { command: "echo 'two\nlines'", expected: ['two', 'lines'] },
    ]);
  });

  it('refuses an incomplete command and an answer that follows no command', () => {
    expect(() => statements("echo 'open")).toThrow(/incomplete shell command/);
    expect(() => statements('curl -s x \\')).toThrow(/incomplete shell command/);
    expect(() => statements('# -> {}')).toThrow(/documents no command/);
  });

  it('reads … as any text and everything else literally', () => {
    expect(matchesDocumented('{"id":"n…"}', '{"id":"nAb-9_"}')).toBe(true);
    expect(matchesDocumented('{"id":"n…"}', '{"id":"x1"}')).toBe(false);
    expect(matchesDocumented('a.b', 'axb')).toBe(false);
    expect(matchesDocumented('{"error":"ticket_conflict"}', '{"error":"ticket_conflict"} ')).toBe(false);
    expect(matchesDocumented('SERVICE_APP_KEY=…', 'SERVICE_APP_KEY=')).toBe(true);
  });

  it('finds a level-2 section (not fooled by ## inside a fence) and its fenced blocks', () => {
    const markdown = ['# T', '## One', '```sh', '## not a heading', 'echo 1', '```', 'prose', '```text', 'out', '```', '## Two', 'x'].join('\n');
    const body = section(markdown, 'One');
    expect(fences(body)).toEqual([
      { info: 'sh', text: '## not a heading\necho 1' },
      { info: 'text', text: 'out' },
    ]);
    expect(() => section(markdown, 'Three')).toThrow(/no section "## Three"/);
  });
});
