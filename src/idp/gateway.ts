import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { requestSlot } from '../kit/identity.js';

// The API gateway in front of /auth/v1 and /rest/v1, as the Supabase CLI's gateway behaves with the
// opaque keys: `apikey` must be one of the two keys and decides the role of a request that carries
// no user JWT; a `Bearer <JWT>` is passed on unchanged (the endpoints verify it), while a missing
// Authorization or `Bearer sb_…` stands for the key's own role. Nothing is minted: the role travels
// in `callers.get(request)` instead of a JWT.

export type KeyRole = 'anon' | 'service_role';

export interface Caller {
  /** The role the `apikey` grants. */
  keyRole: KeyRole;
  /**
   * `key`: no user JWT, act as keyRole. `jwt`: a bearer token to verify (not yet verified!).
   * `other`: an Authorization header that is not a bearer token, forwarded as is.
   */
  bearer: { kind: 'key' } | { kind: 'jwt'; token: string } | { kind: 'other' };
}

/** The gateway's verdict on a request behind it (every /auth/v1 and /rest/v1 route). */
export const callers = requestSlot<Caller>('idp caller');

export const gatewayErrors = {
  invalidKey: { message: 'Invalid API key', hint: 'Double check your Supabase `anon` or `service_role` API key.' },
  missingKey: { message: 'No API key found in request', hint: 'No `apikey` request header or url param was found.' },
};

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Equal-length digests, so the comparison time says nothing about how much of a key matched. */
function sameKey(given: Buffer, expected: Buffer): boolean {
  return timingSafeEqual(given, expected);
}

const BEARER = /^bearer\s+(\S+)\s*$/i;

export function parseBearer(header: string | undefined): Caller['bearer'] {
  if (header === undefined || header === '') return { kind: 'key' };
  const match = BEARER.exec(header);
  if (!match) return { kind: 'other' };
  const token = match[1]!;
  return token.startsWith('sb_') ? { kind: 'key' } : { kind: 'jwt', token };
}

/** The two keys the gateway accepts as `apikey`. */
export interface GatewayKeys {
  publishable: string;
  secret: string;
}

/** An onRequest hook for the scopes behind the gateway. */
export function gatewayHook(keys: GatewayKeys) {
  const publishable = digest(keys.publishable);
  const secret = digest(keys.secret);
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const raw = request.headers.apikey;
    const apikey = Array.isArray(raw) ? raw[0] : raw;
    if (apikey === undefined || apikey === '') return reply.code(401).send(gatewayErrors.missingKey);
    const given = digest(apikey);
    // Both comparisons always run.
    const isPublishable = sameKey(given, publishable);
    const isSecret = sameKey(given, secret);
    if (!isPublishable && !isSecret) return reply.code(401).send(gatewayErrors.invalidKey);
    callers.set(request, { keyRole: isSecret ? 'service_role' : 'anon', bearer: parseBearer(request.headers.authorization) });
  };
}
