import { isDatabaseUnavailable } from '../db.js';
import { cameFromRequestStream } from './request-stream.js';

// The one place that decides what an unexpected error means for the client.
// Every error handler (the kit's, and the idp's, which speak GoTrue's and
// PostgREST's formats) asks here, then renders the answer in its own format,
// so that one failure is the same status on every service.

export type ErrorClass =
  /** The client closed the connection mid-request: nobody to answer, nothing wrong on our side. */
  | { kind: 'client-gone' }
  /** A client error Fastify or the HTTP layer raised (bad JSON, 413, 415, ...): its message is safe to show. */
  | { kind: 'client-error'; status: number }
  /**
   * The service cannot serve this request right now but will again: the
   * database is unreachable, its pool exhausted, or the process is out of file
   * descriptors. A 503 with Retry-After.
   */
  | { kind: 'unavailable'; cause: 'database' | 'file-descriptors' }
  /** A bug or an unexpected failure: a 500 whose cause stays in the log. */
  | { kind: 'internal' };

/** How long /readyz reports "out of file descriptors" after the process last hit EMFILE/ENFILE. */
export const DESCRIPTOR_EXHAUSTION_MEMORY_MS = 10_000;

// File descriptors belong to the process, so this is process-wide.
let descriptorsLastExhaustedAt = Number.NEGATIVE_INFINITY;

/** EMFILE: this process's open-file limit; ENFILE: the system's. */
export function isDescriptorExhaustion(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === 'EMFILE' || code === 'ENFILE';
}

/** Records that the process ran out of file descriptors (also done by classifyError). */
export function noteDescriptorExhaustion(now = Date.now()): void {
  descriptorsLastExhaustedAt = now;
}

export function descriptorsExhaustedRecently(now = Date.now()): boolean {
  return now - descriptorsLastExhaustedAt < DESCRIPTOR_EXHAUSTION_MEMORY_MS;
}

/**
 * What an error that is not one of the service's own answers means. Seeing
 * EMFILE/ENFILE is also recorded, for /readyz.
 */
export function classifyError(err: unknown): ErrorClass {
  // First by origin: an "aborted" request stream carries ECONNRESET, like a lost database connection.
  if (cameFromRequestStream(err)) return { kind: 'client-gone' };
  if (isDescriptorExhaustion(err)) {
    noteDescriptorExhaustion();
    return { kind: 'unavailable', cause: 'file-descriptors' };
  }
  const status = (err as { statusCode?: unknown } | null)?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) return { kind: 'client-error', status };
  if (isDatabaseUnavailable(err)) return { kind: 'unavailable', cause: 'database' };
  return { kind: 'internal' };
}

/** What an unexpected error becomes: its class and status, plus the message when it is safe to show. */
export type ErrorOutcome =
  | { kind: 'client-gone'; status: number }
  | { kind: 'client-error'; status: number; message: string }
  | { kind: 'unavailable'; status: 503 }
  | { kind: 'internal'; status: 500 };

interface ErrorLog {
  info(msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * Classifies an error that is not one of the service's own answers, logs it
 * once as its class deserves (the cause of a 5xx stays in the log), and says
 * what to answer. Every error handler calls this, then renders the outcome in
 * its own wire format.
 */
export function unexpectedErrorOutcome(err: Error, log: ErrorLog): ErrorOutcome {
  const kind = classifyError(err);
  const statusCode = (err as { statusCode?: unknown }).statusCode;
  switch (kind.kind) {
    case 'client-gone':
      // Nobody reads this answer; the status only closes the request's log line.
      log.info('client closed the connection before the request was complete');
      return {
        kind: 'client-gone',
        status: typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500 ? statusCode : 400,
      };
    case 'client-error':
      // Fastify's own client errors (bad JSON, 413, 415) have safe messages.
      return { kind: 'client-error', status: kind.status, message: err.message };
    case 'unavailable':
      log.warn(
        { err: { message: err.message, code: (err as { code?: string }).code } },
        kind.cause === 'database' ? 'database unavailable' : 'out of file descriptors',
      );
      return { kind: 'unavailable', status: 503 };
    case 'internal':
      log.error({ err }, 'unhandled error');
      return { kind: 'internal', status: 500 };
  }
}
