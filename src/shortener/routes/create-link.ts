import { type Static, Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Ipv6Prefixes } from '../../kit/http/client-ip.js';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import type { FixedWindowLimiter, RateLimitDecision } from '../../kit/rate-limit.js';
import { badRequest, HttpError } from '../../kit/http/errors.js';
import { type LinkLimits, MAX_VISITS_LIMIT, normaliseTags, type LinkService } from '../links.js';
import { isOwnShortLink, MAX_URL_LENGTH, OWN_SHORT_LINK } from '../target-urls.js';
import type { Link } from '../repository.js';
import { parseIsoTimestamp } from '../timestamps.js';
import { type Access, bearerOf, type Principal, unauthorized } from '../access.js';
import { MAX_TITLE_LENGTH } from './admin-links.js';
import { type LinkPasswords, PASSWORD_RULE, parsePassword } from '../link-passwords.js';
import { LinkRulesSchema, parseRules, RULES_DESCRIPTION } from '../link-rules.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { CREATE_KEY_REFUSED } from './schemas.js';

export const CreateLinkBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH }),
    expires_at: Type.Optional(Type.String({ maxLength: 64, description: 'ISO 8601 timestamp with an offset, in the future' })),
    max_visits: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_VISITS_LIMIT, description: 'counted redirects allowed; then 410' })),
    title: Type.Optional(Type.String({ maxLength: MAX_TITLE_LENGTH, description: 'a name for the people who manage the link' })),
    tags: Type.Optional(Type.Array(Type.Unknown(), { description: 'up to 10 tags: 1-32 of a-z 0-9 _ - each' })),
    alias: Type.Optional(
      Type.String({ maxLength: 64, description: 'a chosen code instead of a generated one: 3 to 64 of A-Z a-z 0-9 _ -, case-sensitive' }),
    ),
    // Checked by parseRules rather than the schema, so that each 400 names the rule at fault.
    rules: Type.Optional(Type.Unknown({ description: `${RULES_DESCRIPTION} Only with an API key or the admin key.` })),
    password: Type.Optional(
      Type.String({
        description: `Visitors must give it before the redirect: ${PASSWORD_RULE}. Stored as a bcrypt hash, never shown. Not in a bulk create`,
      }),
    ),
  },
  { additionalProperties: false },
);

/** expires_at as an instant: ISO 8601 with an explicit offset, so no one's local time is guessed. */
function parseExpiresAt(text: string | undefined): Date | undefined {
  if (text === undefined) return undefined;
  const ms = parseIsoTimestamp(text, { dateOnly: false });
  if (ms === undefined) throw badRequest('expires_at must be an ISO 8601 timestamp with an offset, e.g. 2026-12-31T23:59:59Z');
  return new Date(ms);
}

export const ANONYMOUS_RULES = 'body/rules need Authorization: Bearer <API key> (or the admin key): an anonymous link has one destination';

/**
 * The fields of a create body beyond what its schema checks, as the create takes them (400s name the field).
 * Rules only with credentials: a link that sends each device somewhere else hides where it goes from
 * whoever checks it, which an anonymous create must not be able to do.
 */
export function createFields(
  body: Static<typeof CreateLinkBody>,
  baseUrl: string,
  ownerKeyId: number | undefined,
  anonymous: boolean,
): LinkLimits {
  const { url, max_visits: maxVisits, title } = body;
  if (title?.includes('\u0000')) throw badRequest('body/title must not contain U+0000');
  if (isOwnShortLink(url, baseUrl)) throw badRequest(OWN_SHORT_LINK);
  if (body.rules !== undefined && anonymous) throw badRequest(ANONYMOUS_RULES);
  return {
    expiresAt: parseExpiresAt(body.expires_at),
    maxVisits,
    ownerKeyId,
    title: title?.trim() ? title : undefined,
    alias: body.alias,
    tags: body.tags === undefined ? undefined : normaliseTags(body.tags),
    rules: body.rules === undefined ? undefined : parseRules(body.rules, baseUrl),
  };
}

/** The data of a created link, as the create answers it. */
export function createdData(link: Link, manageToken: string, baseUrl: string) {
  return {
    code: link.code,
    short_url: `${baseUrl}/${link.code}`,
    original_url: link.original_url,
    ...(link.expires_at !== null && { expires_at: link.expires_at.toISOString() }),
    ...(link.max_visits !== null && { max_visits: link.max_visits }),
    ...(link.title !== null && { title: link.title }),
    ...(link.tags.length > 0 && { tags: link.tags }),
    ...(link.rules !== null && { rules: link.rules }),
    ...(link.password_hash !== null && { password_protected: true as const }),
    manage_token: manageToken,
  };
}

export const CreatedData = Type.Object({
  code: Type.String(),
  short_url: Type.String(),
  original_url: Type.String(),
  // Echoed only when given.
  expires_at: Type.Optional(Type.String({ format: 'date-time' })),
  max_visits: Type.Optional(Type.Integer()),
  title: Type.Optional(Type.String()),
  tags: Type.Optional(Type.Array(Type.String())),
  rules: Type.Optional(LinkRulesSchema),
  password_protected: Type.Optional(Type.Literal(true, { description: 'Present when the link asks its visitors for a password' })),
  manage_token: Type.String({
    description: "Shown once: the bearer that reads this link's visit detail (only its digest is stored)",
  }),
});

/** Who a create is by: undefined without Authorization (the contract's anonymous create); 401 for a bearer that is neither an API key nor the admin key. */
export async function creator(access: Access, request: FastifyRequest): Promise<Principal | undefined> {
  const bearer = bearerOf(request);
  if (bearer === undefined && request.headers.authorization === undefined) return undefined;
  const principal = await access.principal(bearer);
  if (principal?.kind === 'key' || principal?.kind === 'admin') return principal;
  throw unauthorized('Authorization on a create must be Bearer <API key>, or be left out');
}

/** The key of a creator's hourly quota: each API key's own, and the admin key's. */
export const quotaKey = (principal: Principal) => (principal.kind === 'key' ? `key:${principal.key.id}` : 'admin');

export const quotaMessage = (max: number, seconds: number) =>
  `This API key may create ${max} links per hour: try again in ${seconds} second${seconds === 1 ? '' : 's'}.`;

/** The 429 message of the per-address create limit, the contract's wording. */
export const addressLimitMessage = (seconds: number) =>
  `Too many requests, please try again in ${seconds} second${seconds === 1 ? '' : 's'}.`;

/** X-RateLimit-Limit and X-RateLimit-Remaining of a create's count. */
export const rateLimitHeaders = (reply: FastifyReply, decision: RateLimitDecision) =>
  reply.header('x-ratelimit-limit', String(decision.limit)).header('x-ratelimit-remaining', String(decision.remaining));

/** A create refused by its limit, before any work: 429 with Retry-After. */
export const refuseCreate = (reply: FastifyReply, seconds: number, message: string) =>
  reply.code(429).header('retry-after', String(seconds)).send(statusEnvelope(429, message));

export async function createLinkRoute(
  app: App,
  {
    links,
    limiter,
    keyQuota,
    baseUrl,
    ipv6,
    access,
    passwords,
  }: {
    links: LinkService;
    limiter: FixedWindowLimiter;
    keyQuota: FixedWindowLimiter;
    baseUrl: string;
    ipv6: Ipv6Prefixes;
    access: Access;
    passwords: LinkPasswords;
  },
): Promise<void> {
  app.post(
    '/api/links',
    {
      schema: {
        tags: ['links'],
        summary: 'Create a short link (10 per minute per client IP)',
        description:
          'The url is refused (400) when it breaks rule 1, or when it points into this service itself (BASE_URL): a short link of a short link is a chain of redirects.',
        body: CreateLinkBody,
        response: {
          201: envelope(CreatedData),
          400: described(ErrorEnvelope, 'The URL or another field breaks its rule, or the body is not valid JSON', {
            status: 400,
            response: 'Bad Request',
            message: 'body/url must NOT have fewer than 1 characters',
          }),
          401: CREATE_KEY_REFUSED,
          409: described(ErrorEnvelope, 'The alias is taken by a link, or was the code of a deleted one', {
            status: 409,
            response: 'Conflict',
            message: 'alias "launch" is taken: choose another (codes of deleted links are never reused)',
          }),
          429: described(ErrorEnvelope, 'More than 10 creations this minute from this client (Retry-After, X-RateLimit-*)', {
            status: 429,
            response: 'Too Many Requests',
            message: 'Too many requests, please try again in 42 seconds.',
          }),
        },
      },
      // Before body validation: every request counts, malformed ones included.
      // One window per client, however its address is spelled; IPv6 per /64 and per wider /48 (16x).
      onRequest: async (request, reply) => {
        const decision = await limiter.consumeAddress('', request.ip, ipv6);
        void rateLimitHeaders(reply, decision);
        if (decision.limited) return refuseCreate(reply, decision.retryAfterSeconds, addressLimitMessage(decision.retryAfterSeconds));
      },
    },
    async (request, reply) => {
      // Without Authorization the create is the contract's anonymous one. With an API key the link
      // belongs to that key; the admin key creates a link of no one's; anything else is refused.
      const principal = await creator(access, request);
      if (principal !== undefined) {
        const quota = await keyQuota.consumeUnits(quotaKey(principal), 1);
        if (quota.admitted === 0) {
          throw new HttpError(429, quotaMessage(keyQuota.max, quota.retryAfterSeconds), { 'retry-after': String(quota.retryAfterSeconds) });
        }
      }
      const fields = createFields(request.body, baseUrl, principal?.kind === 'key' ? principal.key.id : undefined, principal === undefined);
      // Anyone may protect a link: the create's rate limit bounds the hashing an anonymous client causes.
      if (request.body.password !== undefined) fields.passwordHash = await passwords.hash(parsePassword(request.body.password, 'body'));
      const { link, manageToken } = await links.create(request.body.url, fields);
      return reply.code(201).send(dataEnvelope(201, 'Short link created successfully', createdData(link, manageToken, baseUrl)));
    },
  );
}
