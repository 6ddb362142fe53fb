import { decode, encode } from '@msgpack/msgpack';
import type { RedisClient } from '../../src/redis/connection.js';
import type { Keys } from '../../src/redis/keys.js';

/** ratingtree.lua RatingTree.LAYOUT: the node layout below. */
const LAYOUT = 2;

/** A subtree's summary as a node keeps it for each child: [minUp, minDown, oldest, oldestPlayer, oldestOther, oldestOtherPlayer]. */
type Summary = [number, number, number, string, number, string];

/** One node as lua/includes/ratingtree.lua stores it (cmsgpack array, in this order). */
interface TreeNode {
  rating: number;
  createdAt: number;
  player: string;
  id: string;
  seq: number;
  priority: number;
  left: number;
  right: number;
  /** The summaries of the left and the right child's subtrees (all 0 and '' without that child). */
  leftSummary: Summary;
  rightSummary: Summary;
}

const asNode = (fields: unknown[]): TreeNode => {
  const [rating, createdAt, player, id, seq, priority, left, right] = fields as [number, number, string, string, number, number, number, number];
  return {
    rating, createdAt, player, id, seq, priority, left, right,
    leftSummary: fields.slice(8, 14) as Summary,
    rightSummary: fields.slice(14, 20) as Summary,
  };
};

/** Size of a test tree started behind waiting tickets: it never matches, so the first query rebuilds it. */
export const STALE_TREE_SIZE = -1e9;

/**
 * Gives a rated queue an empty rating tree in test mode ("always": kept however small, and
 * asked by every admission it can answer). Started before the queue's first ticket, the tree
 * then holds every ticket the queue waits with; with `stale`, behind tickets already waiting,
 * it holds none of them, and the first admission that asks it builds it anew from the queue.
 */
export async function startRatingTree(redis: RedisClient, keys: Keys, appId: string, queue: string, widenPerSecond: number, stale = false): Promise<void> {
  await redis.hset(keys.queueRatingTree(appId, queue), 'm', Buffer.from(encode([0, stale ? STALE_TREE_SIZE : 0, 'test-salt', widenPerSecond, 1, 0, LAYOUT])));
}

/** How many times the queue's test-mode tree could not tell (lua/includes/pairing.lua treePartner). */
export async function ratingTreeUnsure(redis: RedisClient, keys: Keys, appId: string, queue: string): Promise<number> {
  return Number((await redis.hget(keys.queueRatingTree(appId, queue), 'unsure')) ?? 0);
}

/** The queue's rating tree's meta ({ root, size, widen, always, newest, layout }), or null when it has none. */
export async function ratingTreeMeta(
  redis: RedisClient,
  keys: Keys,
  appId: string,
  queue: string,
): Promise<{ root: number; size: number; widen: number; always: boolean; newest: number; layout: number | undefined } | null> {
  const blob = await redis.hgetBuffer(keys.queueRatingTree(appId, queue), 'm');
  if (!blob) return null;
  const [root, size, , widen, always, newest, layout] = decode(blob) as [number, number, string, number, number, number | undefined, number | undefined];
  return { root, size, widen, always: always === 1, newest: newest ?? 0, layout };
}

/**
 * What is wrong with one queue's rating tree, as readable lines (none when it is right, or the
 * queue has none, or only a stale test tree): it holds exactly the queue's waiting rated tickets (qw), each with its
 * ticket's rating, createdAt, player and ID; in-order by (rating, sequence); a heap by
 * priority; every child's summary recomputed from its subtree (zeros where there is no child);
 * the meta's layout; size and root as the meta says, and no
 * node newer than the newest sequence it says the tree held (ratingtree.lua RatingTree.inSync).
 */
export async function ratingTreeProblems(redis: RedisClient, keys: Keys, appId: string, queue: string): Promise<string[]> {
  const meta = await ratingTreeMeta(redis, keys, appId, queue);
  if (!meta || meta.size < 0) return []; // none, or a stale test tree never asked (see startRatingTree)
  const problems: string[] = [];
  if (meta.layout !== LAYOUT) problems.push(`layout ${meta.layout}, expected ${LAYOUT}`);
  const raw = await redis.hgetallBuffer(keys.queueRatingTree(appId, queue));
  const nodes = new Map<number, TreeNode>();
  for (const [field, blob] of Object.entries(raw)) {
    if (/^\d+$/.test(field)) nodes.set(Number(field), asNode(decode(blob) as unknown[]));
  }
  const waiting = await redis.zrange(keys.queueRatedWaiting(appId, queue), 0, -1, 'WITHSCORES');
  const expected = new Map<number, string>();
  for (let i = 0; i < waiting.length; i += 2) expected.set(Number(waiting[i + 1]), waiting[i]!);
  if (meta.size !== expected.size) problems.push(`size ${meta.size}, ${expected.size} waiting`);
  for (const [seq, id] of expected) {
    const node = nodes.get(seq);
    if (!node) {
      problems.push(`no node for waiting ${id} (${seq})`);
      continue;
    }
    const [rating, createdAt, player] = await redis.hmget(keys.ticket(appId, id), 'r', 'c', 'p');
    if (node.id !== id || node.seq !== seq || node.rating !== Number(rating) || node.createdAt !== Number(createdAt) || node.player !== player) {
      problems.push(`node ${seq} does not match ticket ${id}`);
    }
  }
  for (const seq of nodes.keys()) if (!expected.has(seq)) problems.push(`node ${seq} is not a waiting ticket`);
  for (const seq of nodes.keys()) if (seq > meta.newest) problems.push(`node ${seq} is newer than the newest the meta says (${meta.newest})`);

  // Walk from the root: every node once, order, heap, summaries. walk returns the summary of
  // the subtree it walked, recomputed from its tickets.
  const seen = new Set<number>();
  const inOrder: TreeNode[] = [];
  const none: Summary = [0, 0, 0, '', 0, ''];
  const walk = (seq: number, parentPriority: number): Summary | null => {
    if (seq === 0) return null;
    const node = nodes.get(seq);
    if (!node || seen.has(seq)) {
      problems.push(`node ${seq} is ${node ? 'reached twice' : 'missing'}`);
      return null;
    }
    seen.add(seq);
    if (node.priority > parentPriority) problems.push(`node ${seq} has a higher priority than its parent`);
    const left = walk(node.left, node.priority);
    inOrder.push(node);
    const right = walk(node.right, node.priority);
    for (const [side, kept, actual] of [['left', node.leftSummary, left], ['right', node.rightSummary, right]] as const) {
      const want = actual ?? none;
      if (want.some((v, i) => v !== kept[i])) problems.push(`node ${seq}: ${side} summary ${JSON.stringify(kept)}, expected ${JSON.stringify(want)}`);
    }
    const wt = meta.widen * (node.createdAt / 1000);
    let minUp = node.rating + wt;
    let minDown = wt - node.rating;
    for (const child of [left, right]) {
      if (!child) continue;
      minUp = Math.min(minUp, child[0]);
      minDown = Math.min(minDown, child[1]);
    }
    const all: { seq: number; player: string }[] = [];
    collect(seq, all);
    all.sort((a, b) => a.seq - b.seq);
    const first = all[0]!;
    const other = all.find((t) => t.player !== first.player);
    return [minUp, minDown, first.seq, first.player, other?.seq ?? 0, other?.player ?? ''];
  };
  const collect = (seq: number, into: { seq: number; player: string }[]): void => {
    const node = nodes.get(seq);
    if (!node || into.length > nodes.size) return; // a cycle is reported by walk
    into.push({ seq: node.seq, player: node.player });
    collect(node.left, into);
    collect(node.right, into);
  };
  walk(meta.root, Infinity);
  if (seen.size !== nodes.size) problems.push(`${nodes.size - seen.size} nodes are not reachable from the root`);
  for (let i = 1; i < inOrder.length; i++) {
    const a = inOrder[i - 1]!;
    const b = inOrder[i]!;
    if (!(a.rating < b.rating || (a.rating === b.rating && a.seq < b.seq))) problems.push(`nodes ${a.seq} and ${b.seq} are out of order`);
  }
  return problems;
}
