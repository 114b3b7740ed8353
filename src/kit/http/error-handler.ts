import type { FastifyError, FastifyInstance } from 'fastify';
import { unexpectedErrorOutcome } from './classify-error.js';
import { HttpError } from './errors.js';
import { watchRequestStream } from './request-stream.js';
import type { ErrorBody } from './error-body.js';

/**
 * Every error a route or Fastify raises, in the service's envelope: the
 * service's own HttpErrors as they are, validation failures as 400s, anything
 * else as the kit's classification says (unexpectedErrorOutcome).
 */
export function answerErrors(app: FastifyInstance, errorBody: ErrorBody): void {
  // Before anything reads the body: an error of the request stream is then known to be the client's.
  app.addHook('onRequest', (request, _reply, done) => {
    watchRequestStream(request.raw);
    done();
  });

  app.setErrorHandler((err: FastifyError | HttpError | Error, request, reply) => {
    if (err instanceof HttpError) {
      void reply.code(err.statusCode).headers(err.headers).send(errorBody(err.statusCode, err.message));
      return;
    }
    if ((err as FastifyError).validation) {
      void reply.code(400).send(errorBody(400, err.message));
      return;
    }
    const outcome = unexpectedErrorOutcome(err, request.log);
    switch (outcome.kind) {
      case 'client-gone':
        void reply.code(outcome.status).send(errorBody(outcome.status, 'Request not complete'));
        return;
      case 'client-error':
        void reply.code(outcome.status).send(errorBody(outcome.status, outcome.message));
        return;
      case 'unavailable':
        void reply.code(503).header('retry-after', '1').send(errorBody(503, 'Service temporarily unavailable, try again shortly'));
        return;
      case 'internal':
        void reply.code(500).send(errorBody(500, 'Internal Server Error'));
    }
  });
}
