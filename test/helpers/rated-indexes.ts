import type { RedisClient } from '../../src/redis/connection.js';
import type { Keys } from '../../src/redis/keys.js';

type Scores = Map<string, string>;

async function scoresOf(redis: RedisClient, key: string): Promise<Scores> {
  const flat = await redis.zrange(key, 0, -1, 'WITHSCORES');
  const scores: Scores = new Map();
  for (let i = 0; i < flat.length; i += 2) scores.set(flat[i]!, flat[i + 1]!);
  return scores;
}

const sameMembers = (a: Scores, b: Scores) => a.size === b.size && [...a.keys()].every((id) => b.has(id));

/**
 * What is wrong with one rated queue's indexes (lua/includes/keys.lua), as readable lines; none
 * when they agree. Every waiting rated ticket is in qw and qr, and in exactly one of qu/qv (with
 * its player's ru/rd, same scores) or qm (with its player's rm, score = rating); qm is the first
 * ZCARD(qm) tickets of qw; every player's rr holds exactly that player's tickets; no per-player
 * key of the queue of any of `players` holds a ticket that is not waiting in it. Assumes every
 * ticket was admitted by this version (none from before an index existed).
 */
export async function ratedIndexProblems(redis: RedisClient, keys: Keys, appId: string, queue: string, players: string[]): Promise<string[]> {
  const problems: string[] = [];
  const q = keys.queueRated(appId, queue);
  const [waiting, byRating, up, down, mature] = (await Promise.all(
    [keys.queueRatedWaiting(appId, queue), q.byRating, q.reachUp, q.reachDown, q.mature].map((key) => scoresOf(redis, key)),
  )) as [Scores, Scores, Scores, Scores, Scores];
  if (!sameMembers(waiting, byRating)) problems.push('qw and qr hold different tickets');
  if (!sameMembers(up, down)) problems.push('qu and qv hold different tickets');
  for (const [name, index] of [['qu', up], ['qm', mature]] as const) {
    for (const id of index.keys()) if (!waiting.has(id)) problems.push(`${name} holds ${id}, which is not waiting in the queue`);
  }
  const order = [...waiting.keys()];
  order.slice(0, mature.size).forEach((id) => {
    if (!mature.has(id)) problems.push(`qm is not the first ${mature.size} tickets of qw (${id})`);
  });
  const perPlayer = new Map<string, { rating: Scores; up: Scores; down: Scores; mature: Scores }>();
  for (const id of order) {
    const [state, player, rating] = await redis.hmget(keys.ticket(appId, id), 's', 'p', 'r');
    if (state !== 'w') problems.push(`${id} is in qw but its state is ${state}`);
    if (up.has(id) === mature.has(id)) problems.push(`${id} is in ${up.has(id) ? 'both qu and qm' : 'neither qu nor qm'}`);
    if (mature.has(id) && Number(mature.get(id)) !== Number(rating)) problems.push(`${id} has score ${mature.get(id)} in qm, rating ${rating}`);
    if (!perPlayer.has(player!)) {
      const own = keys.queuePlayerRated(appId, queue, player!);
      const [r, u, d, m] = (await Promise.all([own.byRating, own.reachUp, own.reachDown, own.mature].map((key) => scoresOf(redis, key)))) as [Scores, Scores, Scores, Scores];
      perPlayer.set(player!, { rating: r, up: u, down: d, mature: m });
    }
    const own = perPlayer.get(player!)!;
    if (own.rating.get(id) !== byRating.get(id)) problems.push(`${id}: rr score ${own.rating.get(id)}, qr ${byRating.get(id)}`);
    if (own.up.get(id) !== up.get(id) || own.down.get(id) !== down.get(id)) problems.push(`${id}: ru/rd and qu/qv disagree`);
    if (own.mature.get(id) !== mature.get(id)) problems.push(`${id}: rm and qm disagree`);
  }
  // Per-player keys of the queue that hold a ticket not waiting in it (left behind).
  for (const player of players) {
    const own = keys.queuePlayerRated(appId, queue, player);
    for (const key of [own.byRating, own.reachUp, own.reachDown, own.mature]) {
      for (const id of await redis.zrange(key, 0, -1)) {
        if (!waiting.has(id)) problems.push(`${key} holds ${id}, which is not waiting in the queue`);
      }
    }
  }
  return problems;
}
