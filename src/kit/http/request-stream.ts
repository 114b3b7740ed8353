import type { IncomingMessage } from 'node:http';

// Errors of a request's own stream (the client closed the connection before
// its body was complete: ECONNRESET "aborted") look like network errors of
// the database connection by their code alone. They are recognised by where
// they were emitted instead.

const fromRequestStreams = new WeakSet<object>();

/** Records every error the request's stream emits; call before anything reads the body. */
export function watchRequestStream(request: IncomingMessage): void {
  request.on('error', (err) => {
    if (typeof err === 'object' && err !== null) fromRequestStreams.add(err);
  });
}

/** Whether the error was emitted by a request's stream (the client went away or sent a broken body). */
export function cameFromRequestStream(err: unknown): boolean {
  return typeof err === 'object' && err !== null && fromRequestStreams.has(err);
}
