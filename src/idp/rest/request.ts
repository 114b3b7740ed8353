import type { Caller } from '../gateway.js';
import { ACCESS_TOKEN_AUDIENCE, type SigningKeys, type TokenProblem } from '../keys.js';
import { restErrors } from './errors.js';
import type { TransactionSettings } from './transaction.js';

// What a REST request asks for beyond its query string: who it runs as (PostgREST's JWT rules)
// and its Prefer / Accept headers.

const POSTGREST_CLOCK_SKEW_SECONDS = 30;

const API_ROLES = new Set(['anon', 'authenticated', 'service_role'] as const);
type ApiRole = TransactionSettings['role'];

function jwtError(problem: TokenProblem, token: string) {
  switch (problem.kind) {
    case 'expired':
      return restErrors.jwtClaims('JWT expired');
    case 'not_yet_valid':
      return restErrors.jwtClaims('JWT not yet valid');
    case 'issued_in_future':
      return restErrors.jwtClaims('JWT issued at future');
    // PostgREST tries each of its keys; when none verifies the token (a wrong signature, another
    // project's key, another algorithm) its JWT library reports a key error with these words.
    case 'unverifiable':
    case 'signature':
      return restErrors.jwt('No suitable key or wrong key type', 'None of the keys was able to decode the JWT');
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
  // PostgREST allows 30 s of clock skew on exp, nbf and iat alike.
  const result = await keys.verify(token, { expLeewaySeconds: POSTGREST_CLOCK_SKEW_SECONDS });
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
  resolution: 'merge-duplicates' | 'ignore-duplicates' | null;
  strict: boolean;
  /** `max-affected=N`: enforced on PATCH and DELETE, only with handling=strict (as PostgREST does). */
  maxAffected: number | null;
  /** Preferences not recognised, or recognised but not carried out here: PGRST122 with handling=strict. */
  invalid: string[];
  /** For Preference-Applied. */
  applied: string[];
}

// What PostgREST recognises (Preferences.hs). The ones marked false it carries out and this idp
// does not: with handling=strict they are refused like unknown ones rather than silently ignored.
const KNOWN_PREFERENCES = new Map<string, boolean>([
  ['return=representation', true],
  ['return=minimal', true],
  ['return=headers-only', false],
  ['count=exact', true],
  ['count=planned', false],
  ['count=estimated', false],
  ['resolution=merge-duplicates', true],
  ['resolution=ignore-duplicates', true],
  ['missing=default', false],
  ['missing=null', false],
  ['handling=strict', true],
  ['handling=lenient', true],
  ['params=single-object', false],
  // PostgREST accepts tx= but ignores it unless its configuration lets clients end transactions
  // (off by default): accepted and ignored here too.
  ['tx=commit', true],
  ['tx=rollback', true],
]);

/**
 * `Prefer: return=representation, count=exact, …` (one or several headers, comma separated), read
 * as PostgREST reads it: tokens are exact (case-sensitive), and the first of a kind wins.
 */
export function parsePrefer(header: string | string[] | undefined): Preferences {
  const tokens = (Array.isArray(header) ? header.join(',') : header ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const first = (prefix: string) => tokens.find((t) => t.startsWith(prefix) && KNOWN_PREFERENCES.has(t));
  const ret = first('return=');
  const count = first('count=');
  const resolution = first('resolution=');
  const handling = first('handling=');
  const strict = handling === 'handling=strict';
  const maxToken = tokens.find((t) => t.startsWith('max-affected='));
  const maxRaw = maxToken?.slice('max-affected='.length);
  // A value that is not a whole number is ignored, as PostgREST's reader ignores it.
  const maxAffected = maxRaw !== undefined && /^-?\d+$/.test(maxRaw) && Number.isSafeInteger(Number(maxRaw)) ? Number(maxRaw) : null;
  const invalid = tokens.filter((t) => !t.startsWith('max-affected=') && KNOWN_PREFERENCES.get(t) !== true);
  const applied = [
    ...(resolution ? [resolution] : []),
    ...(ret === 'return=representation' || ret === 'return=minimal' ? [ret] : []),
    ...(count === 'count=exact' ? [count] : []),
    ...(handling ? [handling] : []),
    ...(strict && maxAffected !== null ? [`max-affected=${maxAffected}`] : []),
  ];
  return {
    representation: ret === 'return=representation',
    countExact: count === 'count=exact',
    resolution: resolution === undefined ? null : (resolution.slice('resolution='.length) as NonNullable<Preferences['resolution']>),
    strict,
    maxAffected,
    invalid,
    applied,
  };
}

export const OBJECT_MEDIA_TYPE = 'application/vnd.pgrst.object+json';

/** `Accept: application/vnd.pgrst.object+json` asks for exactly one row, as an object. */
export function wantsSingleObject(accept: string | undefined): boolean {
  return (accept ?? '')
    .split(',')
    .some((part) => part.split(';')[0]!.trim().toLowerCase() === OBJECT_MEDIA_TYPE);
}
