import { paginationLinks } from '../../kit/http/pagination.js';
import { Type } from '@sinclair/typebox';
import { badRequest, notFound } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import type { FastifyRequest } from 'fastify';
import { type Access, type Principal, requireManager } from '../access.js';
import { isWellFormedCode, normaliseTags } from '../links.js';
import { isOwnShortLink, MAX_URL_LENGTH, OWN_SHORT_LINK, validateTargetUrl } from '../target-urls.js';
import { LinkRulesSchema, parseRules, RULES_DESCRIPTION } from '../link-rules.js';
import { type LinkPasswords, PASSWORD_RULE, parsePassword } from '../link-passwords.js';
import type { AdminLink, LinkChanges, LinkRepository } from '../repository.js';
import { parseIsoTimestamp } from '../timestamps.js';
import { ADMIN_SECURITY, CodeParams } from './schemas.js';
import { dataEnvelope, ErrorEnvelope } from '../../kit/http/status-envelope.js';

/** The paging of the accounts admin listing: page from 1, per_page 1–1000, default 50. */
export const PER_PAGE = { default: 50, max: 1000 } as const;
/** Keeps OFFSET far inside what PostgreSQL and JS numbers hold. */
export const MAX_PAGE = 1_000_000;
export const MAX_SEARCH_LENGTH = 2048;

const AdminLinkData = Type.Object({
  code: Type.String(),
  short_url: Type.String(),
  original_url: Type.String(),
  clicks: Type.Integer(),
  createdAt: Type.String({ format: 'date-time' }),
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  max_visits: Type.Union([Type.Integer(), Type.Null()]),
  disabled: Type.Boolean(),
  title: Type.Union([Type.String(), Type.Null()]),
  tags: Type.Array(Type.String()),
  rules: Type.Union([LinkRulesSchema, Type.Null()]),
  password_protected: Type.Boolean({ description: 'Whether visitors must give a password (never the password itself)' }),
});

export const MAX_TITLE_LENGTH = 200;

const adminEnvelope = <T extends ReturnType<typeof Type.Object> | ReturnType<typeof Type.Array>>(data: T) =>
  Type.Object({ status: Type.Integer(), response: Type.String(), message: Type.String(), data });

const ListQuery = Type.Object(
  {
    q: Type.Optional(
      Type.String({ maxLength: MAX_SEARCH_LENGTH, description: 'The exact code, or a case-insensitive substring of the URL' }),
    ),
    page: Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 1, description: 'Page number, from 1' }),
    per_page: Type.Integer({ minimum: 1, maximum: PER_PAGE.max, default: PER_PAGE.default, description: 'Links per page' }),
    tag: Type.Optional(Type.String({ maxLength: 32, description: 'Only links with this tag (case-insensitive)' })),
  },
  { additionalProperties: false },
);

// expires_at and max_visits take a value or null; they are checked here rather
// than by the schema so that each 400 says in one sentence what the field takes.
const PatchBody = Type.Object(
  {
    expires_at: Type.Optional(Type.Unknown()),
    max_visits: Type.Optional(Type.Unknown()),
    disabled: Type.Optional(Type.Boolean()),
    url: Type.Optional(Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH, description: 'A new destination (rule 1 applies)' })),
    title: Type.Optional(Type.Unknown()),
    tags: Type.Optional(Type.Unknown()),
    rules: Type.Optional(
      Type.Unknown({ description: `${RULES_DESCRIPTION} The rules replace the link's rules as a whole; null removes them.` }),
    ),
    password: Type.Optional(Type.Unknown({ description: `A new password visitors must give (${PASSWORD_RULE}); null removes it` })),
  },
  { additionalProperties: false },
);

const BEARER = 'Needs `Authorization: Bearer <SHORTENER_ADMIN_KEY>` or an API key (an author key sees only the links it created).';
const MANAGER_BEARER =
  "Needs `Authorization: Bearer` with the link's manage token, the API key that created it, a manager API key or SHORTENER_ADMIN_KEY.";
const AUTH_ERRORS = {
  401: described(ErrorEnvelope, 'The admin key is missing or wrong (WWW-Authenticate: Bearer)', {
    status: 401,
    response: 'Unauthorized',
    message: 'A valid admin key is required: Authorization: Bearer <SHORTENER_ADMIN_KEY>',
  }),
  503: described(ErrorEnvelope, 'The admin API is off (SHORTENER_ADMIN_KEY is not set), or the database is unavailable (Retry-After)', {
    status: 503,
    response: 'Service Unavailable',
    message: 'Admin API is not configured: set SHORTENER_ADMIN_KEY',
  }),
};
const NOT_FOUND = described(ErrorEnvelope, 'No link has this code (or it was deleted)', {
  status: 404,
  response: 'Not Found',
  message: 'Link not found',
});

const EXPIRES_AT_RULE =
  'body/expires_at must be an ISO 8601 date-time with an offset (e.g. 2027-01-31T23:59:59Z or 2027-02-01T00:59:59+01:00), or null';

/**
 * The instant an expires_at text names; null for null. The create's parser
 * (timestamps.ts): a date-time with an explicit offset, calendar-checked
 * (2027-02-30 is refused, not rolled over), between 1970 and 9999.
 */
function parseExpiresAt(value: unknown): Date | null {
  if (value === null) return null;
  const ms = typeof value === 'string' ? parseIsoTimestamp(value, { dateOnly: false }) : undefined;
  if (ms === undefined) throw badRequest(EXPIRES_AT_RULE);
  return new Date(ms);
}

function parseTitle(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || value.length > MAX_TITLE_LENGTH || value.includes('\u0000')) {
    throw badRequest(`body/title must be a text of at most ${MAX_TITLE_LENGTH} characters, or null`);
  }
  return value.trim() === '' ? null : value;
}

function parseMaxVisits(value: unknown): number | null {
  if (value === null) return null;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw badRequest(`body/max_visits must be an integer from 1 to ${Number.MAX_SAFE_INTEGER}, or null`);
  }
  return value;
}

export async function adminLinksRoutes(
  app: App,
  { repo, baseUrl, access, passwords }: { repo: LinkRepository; baseUrl: string; access: Access; passwords: LinkPasswords },
): Promise<void> {
  const toData = (link: AdminLink) => ({
    code: link.code,
    short_url: `${baseUrl}/${link.code}`,
    original_url: link.original_url,
    clicks: link.clicks,
    createdAt: link.created_at.toISOString(),
    expires_at: link.expires_at?.toISOString() ?? null,
    max_visits: link.max_visits,
    disabled: link.disabled,
    title: link.title,
    tags: link.tags,
    rules: link.rules,
    password_protected: link.password_hash !== null,
  });
  // Before any body or query validation: without credentials, nothing else is said.
  const manager = requireManager(access, repo, isWellFormedCode, true);
  const listers = new WeakMap<FastifyRequest, Principal>();

  app.get(
    '/api/links',
    {
      onRequest: async (request) => {
        const principal = await access.require(request, true);
        // A manage token manages one link and lists nothing.
        if (principal.kind === 'token') throw access.refusal(undefined, true);
        listers.set(request, principal);
      },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'Links, newest first: every link for the admin and manager keys, its own for an author key',
        description: `${BEARER} \`q\` matches the code exactly, or the URL or title as a case-insensitive substring. The total is in X-Total-Count, the other pages in Link.`,
        querystring: ListQuery,
        response: { 200: adminEnvelope(Type.Array(AdminLinkData)), 400: ErrorEnvelope, ...AUTH_ERRORS },
      },
    },
    async (request, reply) => {
      const { page, per_page: perPage } = request.query;
      // An empty q is no filter; PostgreSQL text cannot hold U+0000, so such a search matches nothing and would fail.
      const q = request.query.q === '' ? undefined : request.query.q;
      if (q?.includes('\u0000')) throw badRequest('querystring/q must not contain U+0000');
      const principal = listers.get(request)!;
      const owner = principal.kind === 'key' && principal.key.role === 'author' ? principal.key.id : null;
      const tag = request.query.tag ? request.query.tag.toLowerCase() : undefined;
      const { total, links } = await repo.listForAdmin(q, { limit: perPage, offset: (page - 1) * perPage }, owner, tag ?? null);
      const lastPage = Math.max(1, Math.ceil(total / perPage));
      void reply
        .header('x-total-count', String(total))
        .header('link', paginationLinks('/api/links', { page, perPage, lastPage }, { q, ...(tag !== undefined && { tag }) }));
      return dataEnvelope(200, 'Links retrieved successfully', links.map(toData));
    },
  );

  app.patch(
    '/api/links/:code',
    {
      onRequest: manager.hook,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: "Change a link's destination, rules, title, expiry, visit limit or disabled flag (its manager)",
        description: `${MANAGER_BEARER} Any of url (a new destination, kept in the link's history), title (text or null), expires_at (date-time with offset, or null), max_visits (integer ≥ 1, or null), disabled (boolean), rules (device rules and A/B split, or null), password (text, or null to remove it); at least one.`,
        params: CodeParams,
        body: PatchBody,
        response: {
          200: adminEnvelope(AdminLinkData),
          400: ErrorEnvelope,
          403: ErrorEnvelope,
          404: NOT_FOUND,
          ...AUTH_ERRORS,
        },
      },
    },
    async (request) => {
      const { code } = request.params;
      const body = request.body;
      if (Object.values(body).every((v) => v === undefined)) {
        throw badRequest('body must contain at least one of url, title, tags, expires_at, max_visits, disabled, rules, password');
      }
      const changes: LinkChanges = { disabled: body.disabled };
      if (body.url !== undefined) {
        validateTargetUrl(body.url);
        if (isOwnShortLink(body.url, baseUrl)) throw badRequest(OWN_SHORT_LINK);
        changes.url = body.url;
      }
      if (body.title !== undefined) changes.title = parseTitle(body.title);
      if (body.tags !== undefined) changes.tags = body.tags === null ? [] : normaliseTags(body.tags);
      if (body.expires_at !== undefined) changes.expiresAt = parseExpiresAt(body.expires_at);
      if (body.max_visits !== undefined) changes.maxVisits = parseMaxVisits(body.max_visits);
      if (body.rules !== undefined) changes.rules = parseRules(body.rules, baseUrl);
      // Hashed last, once every other field passed: a refused body costs no bcrypt work.
      if (body.password !== undefined) {
        changes.passwordHash = body.password === null ? null : await passwords.hash(parsePassword(body.password, 'body'));
      }
      const link = await repo.updateLink(code, changes);
      if (!link) throw notFound('Link not found');
      return dataEnvelope(200, 'Link updated successfully', toData(link));
    },
  );

  app.get(
    '/api/links/:code/destinations',
    {
      onRequest: manager.hook,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'The destinations a link had before its changes, latest first (its manager)',
        description: MANAGER_BEARER,
        params: CodeParams,
        response: {
          200: adminEnvelope(Type.Array(Type.Object({ original_url: Type.String(), replaced_at: Type.String({ format: 'date-time' }) }))),
          403: ErrorEnvelope,
          404: NOT_FOUND,
          ...AUTH_ERRORS,
        },
      },
    },
    async (request) => {
      const past = await repo.pastDestinations(request.params.code);
      return dataEnvelope(
        200,
        'Past destinations retrieved successfully',
        past.map((d) => ({ original_url: d.original_url, replaced_at: d.replaced_at.toISOString() })),
      );
    },
  );

  app.delete(
    '/api/links/:code',
    {
      onRequest: manager.hook,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'Delete a link; its code is never issued again (its manager)',
        description: MANAGER_BEARER,
        params: CodeParams,
        response: { 200: adminEnvelope(AdminLinkData), 403: ErrorEnvelope, 404: NOT_FOUND, ...AUTH_ERRORS },
      },
    },
    async (request) => {
      const { code } = request.params;
      const link = await repo.deleteAndTombstone(code);
      if (!link) throw notFound('Link not found');
      return dataEnvelope(200, 'Link deleted successfully', toData(link));
    },
  );
}
