import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appMemory } from '../../src/matchmaking/stats.js';
import { Harness, scanKeys, type TestApp } from '../helpers/harness.js';
import { KNOWN, playKnownSequence } from '../helpers/known-sequence.js';
import { runVersus } from '../helpers/processes.js';
import { redisEnv } from '../setup/redis-url.js';

/** `versus apps stats O [--json]` after a known sequence of matchmaking events. */
let h: Harness;
let app: TestApp;

const versus = (args: string[]) =>
  runVersus(args, { ...redisEnv(), VERSUS_KEY_PREFIX: h.prefix, VERSUS_TEST_CLOCK: '1', LOG_LEVEL: 'silent' });

beforeAll(async () => {
  h = await Harness.start();
  app = await h.registerApp();
  await playKnownSequence(h, app);
});
afterAll(async () => {
  await h?.stop();
});

describe('versus apps stats', () => {
  it('--json: tickets by state, events, waiting per queue (with tickets past their cutoff) and memory', async () => {
    const res = await versus(['apps', 'stats', app.origin, '--json']);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    const stats = JSON.parse(res.stdout);
    expect(stats).toEqual({
      origin: app.origin,
      appId: app.appId,
      events: KNOWN.events,
      tickets: KNOWN.tickets,
      queues: KNOWN.queues,
      queuesKnown: KNOWN.queuesKnown,
      ticketsStored: KNOWN.ticketsStored,
      countersComplete: true,
      memory: { bytes: expect.any(Number), keys: expect.any(Number), sampled: true },
    });
    // Every key of the app (its record and everything under its {appId} scope), each counted once.
    const appKeys = await scanKeys(h.redis, `${h.prefix}:*${app.appId}*`);
    expect(stats.memory.keys).toBe(appKeys.length);
    let bytes = 0;
    for (const key of appKeys) bytes += Number(await h.redis.memory('USAGE', key));
    expect(stats.memory.bytes).toBe(bytes);
  });

  it('prints the same as a human-readable report', async () => {
    const res = await versus(['apps', 'stats', app.origin]);
    expect(res.code).toBe(0);
    const lines = res.stdout.split('\n');
    expect(lines.slice(0, -2)).toEqual([
      `${app.origin} (app ${app.appId})`,
      'tickets     3 waiting, 2 matched, 6 cancelled (1 requested, 5 expired), 1 tombstones',
      'events      11 admissions, 1 matches, 1 cancellations, 5 expirations, 1 tombstones',
      'queues      3 with waiting tickets, 6 known',
      '  arena         1 waiting',
      '  duel          1 waiting  (1 past cutoff, expire when next reached)',
      '  ranked        1 waiting',
    ]);
    expect(lines.at(-2)).toMatch(/^memory {6}\d+(\.\d)? (B|KiB|MiB) in \d+ keys \(MEMORY USAGE, sampled: an estimate\)$/);
    expect(lines.at(-1)).toBe('');
  });

  it('says so when the app holds tickets that ended before the counters began', async () => {
    const older = await h.registerApp();
    await h.setClock(older, 1);
    const duel = { key: 'q', size: 2 };
    expect((await h.call(older, 'createTicket', { id: 'x1', player: 'p1', queue: duel, payload: {} })).body.state).toBe('waiting');
    expect((await h.call(older, 'createTicket', { id: 'x2', player: 'p2', queue: duel, payload: {} })).body.state).toBe('matched');
    expect((await h.call(older, 'createTicket', { id: 'x3', player: 'p3', queue: duel, payload: {} })).body.state).toBe('waiting');
    // As if these tickets had been admitted by a version without the counters.
    await h.redis.unlink(h.keys.matchmakingStats(older.appId));
    const res = await versus(['apps', 'stats', older.origin, '--json']);
    expect(JSON.parse(res.stdout)).toMatchObject({ ticketsStored: 3, countersComplete: false, tickets: { waiting: 3, matched: 0 }, queues: [{ queue: 'q', waiting: 1, pastCutoff: 0 }] });
    const text = (await versus(['apps', 'stats', older.origin])).stdout;
    expect(text).toContain(
      'note        the queues hold 1 waiting tickets, the counters 3: tickets that ended before the counters began count as waiting (or tickets changed while this ran)\n',
    );
    // The complete app of the known sequence has no note.
    expect((await versus(['apps', 'stats', app.origin])).stdout).not.toContain('note');
  });

  it('shows control characters in a queue key quoted, never raw', async () => {
    const odd = await h.registerApp();
    await h.setClock(odd, 1);
    expect((await h.call(odd, 'createTicket', { id: 'x1', player: 'p', queue: { key: 'a\u001b[2Jb c', size: 2 }, payload: {} })).status).toBe(200);
    const text = (await versus(['apps', 'stats', odd.origin])).stdout;
    expect(text).toContain('  "a\\u001b[2Jb c"        1 waiting\n');
    expect(text).not.toContain('\u001b');
  });

  it('refuses an unknown app, a bad origin and a stray argument with one line, exit 1', async () => {
    expect(await versus(['apps', 'stats', 'https://nobody.example'])).toEqual({ code: 1, stdout: '', stderr: 'versus: no app https://nobody.example\n' });
    expect(await versus(['apps', 'stats', 'https://nobody.example', '--json'])).toEqual({ code: 1, stdout: '', stderr: 'versus: no app https://nobody.example\n' });
    const bad = await versus(['apps', 'stats', 'nobody.example/path']);
    expect(bad).toMatchObject({ code: 1, stdout: '' });
    expect(bad.stderr).toMatch(/^versus: nobody\.example\/path is not a canonical origin .*\n$/);
    expect(await versus(['apps', 'stats', app.origin, 'extra'])).toEqual({ code: 1, stdout: '', stderr: 'versus: usage: versus apps stats O [--json]\n' });
    const unknownFlag = await versus(['apps', 'stats', app.origin, '--yaml']);
    expect(unknownFlag.code).toBe(1);
    expect(unknownFlag.stderr.split('\n')).toHaveLength(2);
  });

  it('memory counts nothing for an app without keys but its record', async () => {
    const empty = await h.registerApp();
    const memory = await appMemory(h.redis, h.keys, empty.origin);
    expect(memory.keys).toBe(1);
    expect(memory.bytes).toBe(Number(await h.redis.memory('USAGE', h.keys.appRecord(empty.origin))));
  });
});
