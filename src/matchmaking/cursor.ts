import { createHash } from 'node:crypto';
import { InvalidArgument } from './validation.js';

/**
 * listTickets continuation values: base64url of `<snapshot>.<after>.<check>`, where the check
 * binds the position to the app and to the filters of the traversal. A cursor that is
 * malformed, truncated, altered, or reused by another app or with other filters is refused.
 */
export interface CursorPosition {
  /** Highest sequence the traversal covers (fixed by its first page). */
  snapshot: string;
  /** Sequence of the last ticket already returned. */
  after: string;
}

interface Scope {
  appId: string;
  player?: string | undefined;
  id?: string | undefined;
}

function checkOf(scope: Scope, position: CursorPosition): string {
  return createHash('sha256')
    .update(JSON.stringify([scope.appId, scope.player ?? null, scope.id ?? null, position.snapshot, position.after]))
    .digest('base64url')
    .slice(0, 16);
}

export function encodeCursor(scope: Scope, position: CursorPosition): string {
  return Buffer.from(`${position.snapshot}.${position.after}.${checkOf(scope, position)}`).toString('base64url');
}

export function decodeCursor(scope: Scope, cursor: string): CursorPosition {
  const refuse = () => new InvalidArgument('input.cursor: not a cursor of this listing');
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw refuse();
  const match = /^(\d{1,15})\.(\d{1,15})\.([A-Za-z0-9_-]{16})$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  if (!match) throw refuse();
  const position = { snapshot: match[1]!, after: match[2]! };
  if (checkOf(scope, position) !== match[3]) throw refuse();
  return position;
}
