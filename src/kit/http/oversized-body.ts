import type { FastifyError, FastifyInstance } from 'fastify';

/**
 * The largest declared body, refused as too large, that is still read (and
 * thrown away) so that the client can read the refusal. Beyond it the
 * connection is closed as Fastify asks: reading more of what was refused
 * would let one client make the service read without limit.
 */
export const OVERSIZED_BODY_DISCARD_BYTES = 8 * 1024 * 1024;

/**
 * Fastify answers a body over the limit with 413 before reading it, and asks
 * for the connection to be closed. But closing a socket with unread bytes
 * makes the kernel reset it, and a client still writing its body then gets a
 * broken pipe instead of the 413 it was sent, whenever the reset arrives
 * before it has read the answer (seen with Node's client on a busy machine).
 *
 * So for a declared Content-Length up to OVERSIZED_BODY_DISCARD_BYTES the
 * connection stays open: Node reads and discards the rest of the body (within
 * the request deadline, HTTP_REQUEST_TIMEOUT_MS), and the client reads the
 * 413 and may go on using the connection. A larger or undeclared (chunked)
 * body still closes it. While the server stops, the drain's onSend hook
 * (which runs after every onError hook) still closes the connection.
 */
export function readRefusedBodies(app: FastifyInstance): void {
  // onError, not onSend: only refused requests pay for the check, never a redirect or a token check.
  app.addHook('onError', (request, reply, error, done) => {
    if (
      (error as FastifyError).code === 'FST_ERR_CTP_BODY_TOO_LARGE' &&
      reply.getHeader('connection') === 'close' &&
      request.headers['transfer-encoding'] === undefined
    ) {
      const declared = Number(request.headers['content-length']);
      if (Number.isSafeInteger(declared) && declared <= OVERSIZED_BODY_DISCARD_BYTES) reply.removeHeader('connection');
    }
    done();
  });
}
