import type { Caller } from '../gateway.js';
import { ACCESS_TOKEN_AUDIENCE, type SigningKeys, type TokenProblem } from '../keys.js';
import { restErrors } from './errors.js';
import type { TransactionSettings } from './sql.js';

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
  representation: 'representation' | 'minimal' | null;
  count: 'exact' | 'planned' | 'estimated' | null;
  resolution: 'merge-duplicates' | 'ignore-duplicates' | null;
  /** `missing=default`: a column a row leaves out takes its default (`missing=null`, the default: null). */
  missing: 'default' | 'null' | null;
  /** `params=single-object`: the whole body is the one json/jsonb argument of a function. */
  singleObject: boolean;
  /** `tx=commit|rollback`, only where the configuration lets clients choose (else null). */
  tx: 'commit' | 'rollback' | null;
  handling: 'strict' | 'lenient' | null;
  /** `max-affected=N`: enforced on PATCH and DELETE, only with handling=strict (as PostgREST does). */
  maxAffected: number | null;
  /** Preferences not recognised, or recognised but not carried out here: PGRST122 with handling=strict. */
  invalid: string[];
}

// What PostgREST recognises (Preferences.hs). The ones marked false it carries out and this idp
// does not: with handling=strict they are refused like unknown ones rather than silently ignored.
const KNOWN_PREFERENCES = new Map<string, boolean>([
  ['return=representation', true],
  ['return=minimal', true],
  ['return=headers-only', false],
  ['count=exact', true],
  ['count=planned', true],
  ['count=estimated', true],
  ['resolution=merge-duplicates', true],
  ['resolution=ignore-duplicates', true],
  ['missing=default', true],
  ['missing=null', true],
  ['handling=strict', true],
  ['handling=lenient', true],
  ['params=single-object', true],
  // PostgREST accepts tx= always, and applies it only when its db-tx-end setting allows clients to
  // choose (IDP_REST_TX_END here).
  ['tx=commit', true],
  ['tx=rollback', true],
]);

/**
 * `Prefer: return=representation, count=exact, …` (one or several headers, comma separated), read
 * as PostgREST reads it: tokens are exact (case-sensitive), and the first of a kind wins.
 */
const NO_PREFERENCES: Preferences = Object.freeze({
  representation: null,
  count: null,
  resolution: null,
  missing: null,
  singleObject: false,
  tx: null,
  handling: null,
  maxAffected: null,
  invalid: [],
}) as Preferences;

export function parsePrefer(header: string | string[] | undefined, opts: { txOverride: boolean } = { txOverride: false }): Preferences {
  if (header === undefined) return NO_PREFERENCES;
  const tokens = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  const first = (prefix: string) => tokens.find((t) => t.startsWith(prefix) && KNOWN_PREFERENCES.get(t) === true)?.slice(prefix.length);
  const maxToken = tokens.find((t) => t.startsWith('max-affected='));
  const maxRaw = maxToken?.slice('max-affected='.length);
  // A value that is not a whole number is ignored, as PostgREST's reader ignores it.
  const maxAffected = maxRaw !== undefined && /^-?\d+$/.test(maxRaw) && Number.isSafeInteger(Number(maxRaw)) ? Number(maxRaw) : null;
  const tx = first('tx=');
  return {
    representation: (first('return=') as Preferences['representation'] | undefined) ?? null,
    count: (first('count=') as Preferences['count'] | undefined) ?? null,
    resolution: (first('resolution=') as Preferences['resolution'] | undefined) ?? null,
    missing: (first('missing=') as Preferences['missing'] | undefined) ?? null,
    singleObject: first('params=') === 'single-object',
    tx: opts.txOverride ? ((tx as Preferences['tx'] | undefined) ?? null) : null,
    handling: (first('handling=') as Preferences['handling'] | undefined) ?? null,
    maxAffected,
    invalid: tokens.filter((t) => !t.startsWith('max-affected=') && KNOWN_PREFERENCES.get(t) !== true),
  };
}

/** What a request of `kind` reports in Preference-Applied, in PostgREST's order (prefAppliedHeader). */
export function appliedPreferences(
  prefs: Preferences,
  kind: 'read' | 'insert' | 'update' | 'delete' | 'call',
  opts: { resolutionApplies?: boolean } = {},
): string[] {
  const strict = prefs.handling === 'strict';
  const write = kind === 'insert' || kind === 'update' || kind === 'delete';
  return [
    ...(kind === 'insert' && prefs.resolution && opts.resolutionApplies ? [`resolution=${prefs.resolution}`] : []),
    ...((kind === 'insert' || kind === 'update') && prefs.missing ? [`missing=${prefs.missing}`] : []),
    ...(write && prefs.representation ? [`return=${prefs.representation}`] : []),
    ...(kind === 'call' && prefs.singleObject ? ['params=single-object'] : []),
    ...(prefs.count ? [`count=${prefs.count}`] : []),
    ...(prefs.tx ? [`tx=${prefs.tx}`] : []),
    ...(prefs.handling ? [`handling=${prefs.handling}`] : []),
    ...((kind === 'update' || kind === 'delete' || kind === 'call') && strict && prefs.maxAffected !== null
      ? [`max-affected=${prefs.maxAffected}`]
      : []),
  ];
}

export const OBJECT_MEDIA_TYPE = 'application/vnd.pgrst.object+json';

/** The response's format, chosen from Accept as PostgREST's content negotiation chooses it. */
export interface Media {
  kind: 'json' | 'object' | 'csv';
  /** `nulls=stripped`: keys whose value is null are left out. */
  stripNulls: boolean;
  contentType: string;
}

const JSON_MEDIA: Media = { kind: 'json', stripNulls: false, contentType: 'application/json; charset=utf-8' };

function mediaOf(type: string, params: Map<string, string>): Media | null {
  const stripped = params.get('nulls') === 'stripped';
  switch (type) {
    case '*/*':
    case 'application/json':
      return JSON_MEDIA;
    case 'application/vnd.pgrst.object+json':
    case 'application/vnd.pgrst.object':
      return {
        kind: 'object',
        stripNulls: stripped,
        contentType: `${OBJECT_MEDIA_TYPE}${stripped ? ';nulls=stripped' : ''}; charset=utf-8`,
      };
    case 'application/vnd.pgrst.array+json':
    case 'application/vnd.pgrst.array':
      return stripped
        ? { kind: 'json', stripNulls: true, contentType: 'application/vnd.pgrst.array+json;nulls=stripped; charset=utf-8' }
        : JSON_MEDIA;
    case 'text/csv':
      return { kind: 'csv', stripNulls: false, contentType: 'text/csv; charset=utf-8' };
    default:
      return null;
  }
}

/**
 * The first media type of Accept (by quality, then order) that can be produced; none of them: 406
 * PGRST107. No Accept, or an empty one, means JSON.
 */
export function negotiateMedia(accept: string | undefined): Media {
  if (accept === undefined || accept === '*/*' || accept === 'application/json' || accept.trim() === '') return JSON_MEDIA;
  const offered = accept
    .split(',')
    .map((part, index) => {
      const [rawType = '', ...rawParams] = part.split(';');
      const params = new Map<string, string>();
      for (const p of rawParams) {
        const eq = p.indexOf('=');
        if (eq > 0)
          params.set(
            p.slice(0, eq).trim().toLowerCase(),
            p
              .slice(eq + 1)
              .trim()
              .replace(/^"(.*)"$/, '$1'),
          );
      }
      const q = params.has('q') ? Number(params.get('q')) : 1;
      return { type: rawType.trim().toLowerCase(), params, q: Number.isFinite(q) ? q : 0, index };
    })
    .filter((m) => m.type !== '' && m.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index);
  for (const m of offered) {
    const media = mediaOf(m.type, m.params);
    if (media) return media;
  }
  throw restErrors.mediaTypes(offered.map((m) => m.type));
}
