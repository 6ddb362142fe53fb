/** JSON values as the spec defines them. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * Canonical JSON: object keys sorted, no whitespace. Two inputs are "identical" exactly when
 * their canonical forms are equal, whatever their key order. Callers bound the depth first
 * (validateJsonValue), so recursion here is safe.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`).join(',')}}`;
}

export const MAX_JSON_DEPTH = 256;

export type JsonProblem = 'too_deep' | 'not_finite' | 'bad_string' | 'not_json';

/**
 * Checks, without recursion, that a parsed value is plain JSON of at most MAX_JSON_DEPTH
 * levels whose numbers are finite (JSON.parse turns 1e400 into Infinity) and whose strings
 * and keys are well-formed UTF-16 (no lone surrogates from \uD800 escapes).
 * When `counts` is given and no problem is found, `counts.members` is the number of object
 * members in the whole value (the strict body parser compares it with the text's count).
 */
export function findJsonProblem(root: unknown, maxDepth = MAX_JSON_DEPTH, counts?: { members: number }): JsonProblem | null {
  let members = 0;
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value === 'boolean') continue;
    if (typeof value === 'number') {
      if (!Number.isFinite(value)) return 'not_finite';
      continue;
    }
    if (typeof value === 'string') {
      if (!value.isWellFormed()) return 'bad_string';
      continue;
    }
    if (typeof value !== 'object') return 'not_json';
    if (depth > maxDepth) return 'too_deep';
    if (Array.isArray(value)) {
      for (const item of value) stack.push([item, depth + 1]);
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      if (!key.isWellFormed()) return 'bad_string';
      members += 1;
      stack.push([item, depth + 1]);
    }
  }
  if (counts) counts.members = members;
  return null;
}

export function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}
