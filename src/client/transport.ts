/** One HTTP exchange of the client: a single POST, no redirects followed, no retries. */

/** Calls time out after this long, the reply body included (spec: 30 seconds). */
export const CALL_TIMEOUT_MS = 30_000;

/** Largest reply read (a full page of matched tickets with 16 KiB payloads is about 2.5 MB). */
export const MAX_REPLY_BYTES = 16 * 1024 * 1024;

export interface Reply {
  status: number;
  body: Uint8Array;
}

/**
 * The exchange failed. `status` is null when no reply arrived, else the status of the reply
 * whose body could not be read. `kind`: `network` (connection refused or broken),
 * `timeout` (the 30 seconds passed), `too_large` (the reply body is over MAX_REPLY_BYTES).
 */
export class TransportFailure extends Error {
  constructor(
    readonly kind: 'network' | 'timeout' | 'too_large',
    readonly status: number | null,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

class CallTimeout extends Error {}

async function readBody(response: Response): Promise<Uint8Array> {
  if (response.body === null) return new Uint8Array(0);
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_REPLY_BYTES) {
      await reader.cancel().catch(() => {});
      throw new TransportFailure('too_large', response.status, `reply body over ${MAX_REPLY_BYTES} bytes`);
    }
    chunks.push(value);
  }
  const body = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    body.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return body;
}

/**
 * POSTs once and reads the whole reply within CALL_TIMEOUT_MS. Redirects are not followed: a
 * 3xx reply is returned as it is. Uses the global fetch as it is at call time.
 */
export async function post(url: string, headers: Record<string, string>, body: string): Promise<Reply> {
  const controller = new AbortController();
  const timeout = new CallTimeout(`no complete reply within ${CALL_TIMEOUT_MS / 1000} seconds`);
  const timer = setTimeout(() => controller.abort(timeout), CALL_TIMEOUT_MS);
  let status: number | null = null;
  try {
    const response = await globalThis.fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal: controller.signal });
    status = response.status;
    return { status, body: await readBody(response) };
  } catch (error) {
    if (error instanceof TransportFailure) throw error;
    if (controller.signal.aborted && controller.signal.reason === timeout) {
      throw new TransportFailure('timeout', status, timeout.message, { cause: error });
    }
    const detail = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
    throw new TransportFailure('network', status, `request to ${new URL(url).origin} failed: ${detail}`, { cause: error });
  } finally {
    clearTimeout(timer);
  }
}
