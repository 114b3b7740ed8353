import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { descriptorsExhaustedRecently } from './classify-error.js';
import type { ConnectionCap } from './limits.js';
import type { ErrorBody } from './error-body.js';

export interface HealthOptions {
  /** Throws when the service cannot serve (database unreachable). */
  readiness: () => Promise<void>;
  /** What /readyz says when readiness throws. */
  notReadyMessage?: string;
  errorBody: ErrorBody;
  connections: ConnectionCap;
}

/** GET /healthz (the process answers) and GET /readyz (the service can serve). */
export function serveHealth(app: FastifyInstance, opts: HealthOptions): void {
  const { connections, errorBody } = opts;
  const typed = app.withTypeProvider<TypeBoxTypeProvider>();
  const Health = Type.Object({ status: Type.String() });
  typed.get(
    '/healthz',
    { schema: { tags: ['health'], summary: 'Liveness: the process answers', response: { 200: Health } } },
    async () => ({ status: 'ok' }),
  );
  typed.get(
    '/readyz',
    {
      schema: {
        tags: ['health'],
        summary: 'Readiness: the service can serve (its database or provider answers, connections and descriptors to spare)',
        response: { 200: Health, 503: Type.Object({}, { additionalProperties: true }) },
      },
    },
    async (request, reply) => {
      // Saturation first: a readiness check of the database would itself need a descriptor.
      const saturated =
        connections.open() >= connections.max
          ? 'Service not ready: at its connection limit'
          : descriptorsExhaustedRecently()
            ? 'Service not ready: out of file descriptors'
            : undefined;
      if (saturated) {
        request.log.warn({ connections: connections.open(), max: connections.max }, saturated);
        return reply.code(503).header('retry-after', '1').send(errorBody(503, saturated));
      }
      try {
        await opts.readiness();
        return { status: 'ready' };
      } catch (err) {
        request.log.warn({ err: { message: (err as Error).message } }, 'not ready');
        return reply.code(503).send(errorBody(503, opts.notReadyMessage ?? 'Service not ready: database unreachable'));
      }
    },
  );
}
