import type { FastifyInstance } from 'fastify';
import { parseJsonBody } from '../json-body.js';

/**
 * JSON is the only request body this project accepts, read by the kit's parser so that each
 * refusal says what is wrong (Fastify's calls a body with a `__proto__` key "not valid JSON").
 */
export function acceptJsonBodies(app: FastifyInstance): void {
  app.removeContentTypeParser(['text/plain', 'application/json']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(typeof body === 'string' ? body : body.toString('utf8')));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
