import type { Request } from 'express';
import { findJsonProblem } from '../shared/json.js';
import { ApiError, type ErrorCode } from './errors.js';

/** Largest request body read at all (DESIGN.md): larger ones are answered 413. */
export const MAX_BODY_BYTES = 64 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * Number of object members written in a text that JSON.parse accepted: in valid JSON a colon
 * outside a string only ever separates a member's name from its value. Strings are skipped with
 * indexOf, so long string values cost little.
 */
export function countWrittenMembers(text: string): number {
  let members = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x3a /* : */) {
      members += 1;
    } else if (c === 0x22 /* " */) {
      // To the closing quote: the next quote preceded by an even number of backslashes.
      for (;;) {
        i = text.indexOf('"', i + 1);
        if (i < 0) return members; // unterminated: not JSON (callers pass only text JSON.parse accepted)
        let backslashes = 0;
        while (text.charCodeAt(i - 1 - backslashes) === 0x5c /* \ */) backslashes += 1;
        if (backslashes % 2 === 0) break;
      }
    }
  }
  return members;
}

/**
 * Parses a raw body (express.raw keeps it as bytes) strictly: invalid UTF-8 is refused instead
 * of being replaced with U+FFFD, and so are numbers that overflow to Infinity, lone surrogates,
 * nesting past `maxDepth` (checked without recursion) and duplicate member names in any object
 * at any depth (JSON.parse would silently keep the last one). Duplicates are found without a
 * second parse: the members written in the text (countWrittenMembers) must all be in the parsed
 * value (counted by the same walk that checks depth, numbers and strings); names are compared
 * after unescaping, so `{"a":1,"\u0061":2}` is a duplicate too.
 */
export function parseJsonBody(req: Request, invalidCode: ErrorCode, maxDepth: number): unknown {
  const raw: unknown = req.body;
  if (!Buffer.isBuffer(raw) || raw.length === 0) throw new ApiError(invalidCode, 'empty body');
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw new ApiError(invalidCode, 'body is not valid UTF-8');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError(invalidCode, 'body is not JSON');
  }
  const counts = { members: 0 };
  const problem = findJsonProblem(value, maxDepth, counts);
  if (problem !== null) throw new ApiError(invalidCode, `body JSON: ${problem}`);
  if (counts.members !== countWrittenMembers(text)) throw new ApiError(invalidCode, 'body JSON: duplicate member name');
  return value;
}

/** True when the request's Content-Type is the given media type (parameters ignored). */
export function hasMediaType(req: Request, mediaType: string): boolean {
  const header = req.headers['content-type'];
  return typeof header === 'string' && header.split(';')[0]!.trim().toLowerCase() === mediaType;
}
