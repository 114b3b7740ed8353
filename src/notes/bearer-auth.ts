import type { onRequestAsyncHookHandler } from 'fastify';
import { HttpError } from '../kit/http/errors.js';
import type { App } from '../kit/http/app.js';
import { requestSlot } from '../kit/http/identity.js';
import type { Caller, TokenVerifier } from './token-verifier.js';

/** The verified caller of a request inside the bearer-authenticated scope. */
export const callers = requestSlot<Caller>('notes caller');

const missingBearer = () => new HttpError(401, 'Missing bearer token');

/**
 * The spec's header rule: split on a space; the scheme must be Bearer (compared
 * case-insensitively, as HTTP auth schemes are and as Supabase Auth does) and
 * exactly one non-empty token must follow.
 */
export function bearerTokenOf(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const parts = header.split(' ');
  if (parts.length !== 2) return undefined;
  const [scheme, token] = parts as [string, string];
  if (scheme.toLowerCase() !== 'bearer' || token === '') return undefined;
  return token;
}

/**
 * Installs bearer authentication on one encapsulated scope (the /notes plugin):
 * every route in it runs only for a verified caller, before its body is parsed,
 * and finds that caller with `callers.get(request)`.
 */
export function installBearerAuth(scope: App, verifyToken: TokenVerifier): void {
  const authenticate: onRequestAsyncHookHandler = async (request) => {
    const token = bearerTokenOf(request.headers.authorization);
    if (token === undefined) throw missingBearer();
    callers.set(request, await verifyToken(token));
  };
  scope.addHook('onRequest', authenticate);
}
