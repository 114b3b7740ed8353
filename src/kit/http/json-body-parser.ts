import type { FastifyInstance } from 'fastify';
import { parseJsonBody } from './json-body.js';

/**
 * What a JSON content type with an empty body means: refused (the default), no body at all, or
 * `{}`. supabase-js sends `Content-Type: application/json` on DELETE and POST /logout without any
 * body, so the idp reads such a body as `{}` where every field is optional (auth) and as no body
 * where one is required and its absence is the client's error (REST).
 */
export type EmptyJsonBody = 'refuse' | 'none' | 'empty-object';

/**
 * JSON is the only request body this project accepts, read by the kit's parser so that each
 * refusal says what is wrong (Fastify's calls a body with a `__proto__` key "not valid JSON").
 */
export function acceptJsonBodies(app: FastifyInstance, emptyBody: EmptyJsonBody = 'refuse'): void {
  app.removeContentTypeParser(['text/plain', 'application/json']);
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (emptyBody !== 'refuse' && text.trim() === '') {
      done(null, emptyBody === 'empty-object' ? {} : undefined);
      return;
    }
    try {
      done(null, parseJsonBody(text));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
