import type { FastifyInstance } from 'fastify';
import { InvalidJsonBody, MAX_JSON_DEPTH, nestsDeeperThan } from '../kit/json-body.js';

/**
 * JSON bodies where an empty body is "no body": supabase-js sends `Content-Type: application/json`
 * on DELETE and POST /logout without any body, which Fastify's own parser refuses. `empty` is what
 * such a body becomes: `{}` where every field is optional (auth), undefined where a body is
 * required and its absence is the client's error (REST).
 */
export function acceptOptionalJsonBodies(scope: FastifyInstance, empty: Record<string, never> | undefined): void {
  scope.removeContentTypeParser('application/json');
  scope.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') {
      done(null, empty === undefined ? undefined : {});
      return;
    }
    if (nestsDeeperThan(text, MAX_JSON_DEPTH)) {
      done(new InvalidJsonBody(`exceeded max depth: nested deeper than ${MAX_JSON_DEPTH} levels`), undefined);
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new InvalidJsonBody((err as Error).message), undefined);
    }
  });
}
