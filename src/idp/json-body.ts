import type { FastifyInstance } from 'fastify';

/** A request body that is not JSON; each API reports it in its own envelope. */
export class InvalidJsonBody extends Error {
  readonly statusCode = 400;
  constructor(message: string) {
    super(message);
    this.name = 'InvalidJsonBody';
  }
}

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
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new InvalidJsonBody((err as Error).message), undefined);
    }
  });
}
