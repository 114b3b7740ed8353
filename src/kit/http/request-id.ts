import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';

// Every request has an id, in its log lines and in the X-Request-Id response header.
// Fastify's requestIdHeader stays off: with it, Fastify takes the header as is and never
// calls genReqId, which is where a client-supplied id is checked.

/** A client-supplied id is kept only when it looks like an id, so logs cannot be forged. */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[\w.-]{1,64}$/.test(given) ? given : randomUUID();
}

export function sendRequestIds(app: FastifyInstance): void {
  // A callback hook, not an async one: an async hook costs every request a promise.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    done(null, payload);
  });
}
