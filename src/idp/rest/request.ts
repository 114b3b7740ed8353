import type { Caller } from '../gateway.js';
import { ACCESS_TOKEN_AUDIENCE, type SigningKeys, type TokenProblem } from '../keys.js';
import { restErrors } from './errors.js';
import type { RequestContext } from './transaction.js';

// What a REST request asks for beyond its query string: who it runs as (PostgREST's JWT rules)
// and its Prefer / Accept headers.

const API_ROLES = new Set(['anon', 'authenticated', 'service_role'] as const);
type ApiRole = RequestContext['role'];

function jwtError(problem: TokenProblem, token: string) {
  switch (problem.kind) {
    case 'expired':
      return restErrors.jwtClaims('JWT expired');
    case 'not_yet_valid':
      return restErrors.jwtClaims('JWT not yet valid');
    case 'issued_in_future':
      return restErrors.jwtClaims('JWT issued at future');
    case 'unverifiable':
      return restErrors.jwt('No suitable key or wrong key type');
    case 'signature':
      return restErrors.jwt('JWT cryptographic operation failed');
    case 'malformed': {
      const parts = token.split('.').length;
      return restErrors.jwt(parts === 3 ? 'JWT cryptographic operation failed' : `Expected 3 parts in JWT; got ${parts}`);
    }
  }
}

/** The database role and claims of a request: the key's role, or the verified user JWT's. */
export async function requestIdentity(caller: Caller, keys: SigningKeys): Promise<{ role: ApiRole; claims: Record<string, unknown> }> {
  // PostgREST reads only `Bearer <token>`; any other Authorization means no token, i.e. anon.
  if (caller.bearer.kind === 'other') return { role: 'anon', claims: { role: 'anon' } };
  if (caller.bearer.kind === 'key') return { role: caller.keyRole, claims: { role: caller.keyRole } };
  const token = caller.bearer.token;
  const result = await keys.verify(token);
  if (!result.ok) throw jwtError(result.problem, token);
  const { claims } = result;
  const aud = claims.aud;
  const audiences = Array.isArray(aud) ? aud : [aud];
  // Every token this idp issues is for `authenticated`; anything else was not meant for this API.
  if (!audiences.includes(ACCESS_TOKEN_AUDIENCE)) throw restErrors.jwtClaims('JWT not in audience');
  const role = claims.role === undefined ? 'anon' : claims.role;
  if (typeof role !== 'string' || !API_ROLES.has(role as ApiRole)) throw restErrors.unknownRole(String(role));
  return { role: role as ApiRole, claims: { ...claims, role } };
}

export interface Preferences {
  representation: boolean;
  countExact: boolean;
  /** For Preference-Applied. */
  applied: string[];
}

/** `Prefer: return=representation, count=exact` (one or several headers, comma separated). */
export function parsePrefer(header: string | string[] | undefined): Preferences {
  const tokens = (Array.isArray(header) ? header.join(',') : header ?? '')
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
  const ret = tokens.filter((t) => t.startsWith('return=')).at(-1);
  const representation = ret === 'return=representation';
  const countExact = tokens.includes('count=exact');
  const applied = [...(ret === undefined ? [] : [ret]), ...(countExact ? ['count=exact'] : [])];
  return { representation, countExact, applied };
}

export const OBJECT_MEDIA_TYPE = 'application/vnd.pgrst.object+json';

/** `Accept: application/vnd.pgrst.object+json` asks for exactly one row, as an object. */
export function wantsSingleObject(accept: string | undefined): boolean {
  return (accept ?? '')
    .split(',')
    .some((part) => part.split(';')[0]!.trim().toLowerCase() === OBJECT_MEDIA_TYPE);
}
