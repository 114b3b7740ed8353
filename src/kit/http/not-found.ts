import type { FastifyInstance } from 'fastify';
import type { ErrorBody } from './error-body.js';

export function answerNotFound(app: FastifyInstance, errorBody: ErrorBody): void {
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(errorBody(404, `Route ${request.method} ${request.url.split('?')[0]} not found`));
  });
}
