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
 * How deeply a body may nest objects and arrays. JSON.parse copes with any depth, but what is done
 * with the value afterwards is recursive: JSON.stringify overflowed the stack on 10,000 levels (a
 * 500 on REST inserts and sign-up metadata), and PostgreSQL's JSON parser has a stack limit too. Real bodies nest a
 * few levels; Go's encoding/json, which GoTrue uses, also stops at a fixed depth.
 */
export const MAX_JSON_DEPTH = 1000;

/** Whether the JSON text opens more than `max` nested objects/arrays, counted without parsing (no recursion). */
function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
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
