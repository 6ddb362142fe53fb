import type { Request } from 'express';
import { findJsonProblem } from '../shared/json.js';
import { ApiError, type ErrorCode } from './errors.js';

/** Largest request body read at all (DESIGN.md): larger ones are answered 413. */
export const MAX_BODY_BYTES = 64 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * Parses a raw body (express.raw keeps it as bytes) strictly: invalid UTF-8 is refused instead
 * of being replaced with U+FFFD, and so are numbers that overflow to Infinity, lone surrogates
 * and nesting past `maxDepth` (checked without recursion).
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
  const problem = findJsonProblem(value, maxDepth);
  if (problem !== null) throw new ApiError(invalidCode, `body JSON: ${problem}`);
  return value;
}

/** True when the request's Content-Type is the given media type (parameters ignored). */
export function hasMediaType(req: Request, mediaType: string): boolean {
  const header = req.headers['content-type'];
  return typeof header === 'string' && header.split(';')[0]!.trim().toLowerCase() === mediaType;
}
