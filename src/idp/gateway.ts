import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { requestSlot } from '../kit/http/identity.js';

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

/** Route documents: the key alone, where a request acts as the key's role. */
export const KEY_SECURITY = [{ apikey: [] }];
/** Route documents: the key and a user's access token, where a request acts as that user. */
export const USER_SECURITY = [{ apikey: [], bearerAuth: [] }];

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

/**
 * The gateway's check of one request: answers 401 and returns false for a missing or unknown key;
 * otherwise records the caller and returns true.
 */
function gatewayCheck(keys: GatewayKeys): (request: FastifyRequest, reply: FastifyReply) => boolean {
  const publishable = digest(keys.publishable);
  const secret = digest(keys.secret);
  return (request, reply) => {
    const raw = request.headers.apikey;
    const apikey = Array.isArray(raw) ? raw[0] : raw;
    if (apikey === undefined || apikey === '') {
      reply.code(401).send(gatewayErrors.missingKey);
      return false;
    }
    const given = digest(apikey);
    // Both comparisons always run.
    const isPublishable = sameKey(given, publishable);
    const isSecret = sameKey(given, secret);
    if (!isPublishable && !isSecret) {
      reply.code(401).send(gatewayErrors.invalidKey);
      return false;
    }
    callers.set(request, { keyRole: isSecret ? 'service_role' : 'anon', bearer: parseBearer(request.headers.authorization) });
    return true;
  };
}

/**
 * An onRequest hook for the scopes behind the gateway, callback-style: it never waits, and every
 * request passes it, so it spares each one a promise and a turn of the microtask queue.
 */
export function gatewayHook(keys: GatewayKeys) {
  const check = gatewayCheck(keys);
  return (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
    if (check(request, reply)) done();
  };
}
