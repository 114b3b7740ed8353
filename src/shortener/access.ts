import crypto from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { HttpError, notFound } from '../kit/http/errors.js';
import { ADMIN_NOT_CONFIGURED, adminKeyMatches } from './admin-auth.js';
import type { ApiKey, Link, LinkRepository } from './repository.js';

// Who may do what with links. Three kinds of bearer:
// - the admin key (SHORTENER_ADMIN_KEY): everything;
// - an API key (`sk_` and 43 base64url characters) issued by the admin: an
//   author key manages the links it created, a manager key every link;
// - a link's manage token (43 base64url characters), returned once by the
//   create: that one link.
// The shape tells which is meant, so a bearer that is none of them is refused
// without a database query.

const RANDOM_43 = '[A-Za-z0-9_-]{43}';
const API_KEY_SHAPE = new RegExp(`^sk_${RANDOM_43}$`);
const MANAGE_TOKEN_SHAPE = new RegExp(`^${RANDOM_43}$`);

/** 32 random bytes, base64url: 43 characters. */
const random43 = () => crypto.randomBytes(32).toString('base64url');

/** What is stored of a token or key: its SHA-256 (they are random, so no slow hash is needed). */
export const tokenDigest = (token: string): Buffer => crypto.createHash('sha256').update(token).digest();

/** A manage token, shown once at creation. */
export function newManageToken(): { token: string; hash: Buffer } {
  const token = random43();
  return { token, hash: tokenDigest(token) };
}

/** An API key, shown once when the admin issues it. */
export function newApiKey(): { key: string; hash: Buffer } {
  const key = `sk_${random43()}`;
  return { key, hash: tokenDigest(key) };
}

/** The bearer credential of a request, or undefined when there is none. */
export function bearerOf(request: FastifyRequest): string | undefined {
  const given = /^Bearer (.+)$/i.exec(request.headers.authorization ?? '')?.[1];
  return given === undefined || given.length === 0 ? undefined : given;
}

export type Principal =
  | { kind: 'admin' }
  | { kind: 'key'; key: ApiKey }
  /** A bearer shaped like a manage token: it manages the link whose digest it matches, if any. */
  | { kind: 'token'; digest: Buffer };

export const CREDENTIALS_REQUIRED =
  'Credentials are required: Authorization: Bearer <manage token of the link, API key or SHORTENER_ADMIN_KEY>';

export const unauthorized = (message = CREDENTIALS_REQUIRED) => new HttpError(401, message, { 'www-authenticate': 'Bearer' });

export const forbidden = () =>
  new HttpError(403, 'These credentials do not manage this link: use its manage token, the key that created it, or the admin key');

export class Access {
  constructor(
    private readonly repo: LinkRepository,
    private readonly adminKey: string | undefined,
  ) {}

  /**
   * Who the bearer is, or undefined for a bearer that is nothing (a revoked or
   * unknown API key, or text of no known shape). Only an API key costs a query.
   */
  async principal(bearer: string | undefined): Promise<Principal | undefined> {
    if (bearer === undefined) return undefined;
    if (this.adminKey !== undefined && adminKeyMatches(`Bearer ${bearer}`, this.adminKey)) return { kind: 'admin' };
    if (API_KEY_SHAPE.test(bearer)) {
      const key = await this.repo.useApiKey(tokenDigest(bearer));
      return key && { kind: 'key', key };
    }
    if (MANAGE_TOKEN_SHAPE.test(bearer)) return { kind: 'token', digest: tokenDigest(bearer) };
    return undefined;
  }

  /**
   * The refusal for a request whose bearer is nothing: 401, or 503 while the
   * admin API is off and no key or token was even offered (nothing could have
   * let the caller in but the missing admin key).
   */
  refusal(bearer: string | undefined, adminRoute: boolean): HttpError {
    const offered = bearer !== undefined && (API_KEY_SHAPE.test(bearer) || MANAGE_TOKEN_SHAPE.test(bearer));
    return adminRoute && this.adminKey === undefined && !offered ? new HttpError(503, ADMIN_NOT_CONFIGURED) : unauthorized();
  }

  /**
   * The principal of a request that must have one. `adminRoute`: a route of the
   * admin API (listing, change, delete), which says so when the admin key is not configured.
   */
  async require(request: FastifyRequest, adminRoute: boolean): Promise<Principal> {
    const bearer = bearerOf(request);
    const principal = await this.principal(bearer);
    if (!principal) throw this.refusal(bearer, adminRoute);
    return principal;
  }
}

/** Whether the principal manages the link: the admin and manager keys every link, an author key its own, a token its own. */
export function manages(principal: Principal, link: Pick<Link, 'owner_key_id' | 'manage_token_hash'>): boolean {
  if (principal.kind === 'admin') return true;
  if (principal.kind === 'key') return principal.key.role === 'manager' || link.owner_key_id === principal.key.id;
  const hash = link.manage_token_hash;
  return hash !== null && hash.length === principal.digest.length && crypto.timingSafeEqual(principal.digest, hash);
}

/**
 * The onRequest hook of a link's manager routes (visits, change, delete):
 * credentials first (401 without a query when they are nothing), then the code
 * (404 without a query when malformed), then the link and whether the
 * principal manages it (403). The link found is handed to the handler.
 */
export function requireManager(access: Access, repo: LinkRepository, isWellFormedCode: (code: string) => boolean, adminRoute: boolean) {
  const found = new WeakMap<FastifyRequest, { link: Link; principal: Principal }>();
  const hook = async (request: FastifyRequest): Promise<void> => {
    const principal = await access.require(request, adminRoute);
    const { code } = request.params as { code: string };
    if (!isWellFormedCode(code)) throw notFound('Link not found');
    const link = await repo.find(code);
    if (!link) throw notFound('Link not found');
    if (!manages(principal, link)) throw forbidden();
    found.set(request, { link, principal });
  };
  return { hook, managed: (request: FastifyRequest) => found.get(request)! };
}
