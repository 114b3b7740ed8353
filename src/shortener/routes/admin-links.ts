import { Type } from '@sinclair/typebox';
import { badRequest, notFound } from '../../kit/errors.js';
import type { App } from '../../kit/http.js';
import { described } from '../../kit/openapi.js';
import { requireAdminKey } from '../admin-auth.js';
import { isWellFormedCode } from '../links.js';
import type { AdminLink, LifecycleChanges, LinkRepository } from '../repository.js';
import { ADMIN_SECURITY, CodeParams } from './schemas.js';
import { dataEnvelope, ErrorEnvelope } from '../../kit/status-envelope.js';

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
});

const adminEnvelope = <T extends ReturnType<typeof Type.Object> | ReturnType<typeof Type.Array>>(data: T) =>
  Type.Object({ status: Type.Integer(), response: Type.String(), message: Type.String(), data });

const ListQuery = Type.Object(
  {
    q: Type.Optional(Type.String({ maxLength: MAX_SEARCH_LENGTH, description: 'The exact code, or a case-insensitive substring of the URL' })),
    page: Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 1, description: 'Page number, from 1' }),
    per_page: Type.Integer({ minimum: 1, maximum: PER_PAGE.max, default: PER_PAGE.default, description: 'Links per page' }),
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
  },
  { additionalProperties: false },
);

const BEARER = 'Needs `Authorization: Bearer <SHORTENER_ADMIN_KEY>`.';
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
const NOT_FOUND = described(ErrorEnvelope, 'No link has this code (or it was deleted)', { status: 404, response: 'Not Found', message: 'Link not found' });

// A date-time with an explicit offset (RFC 3339 / ISO 8601 extended form):
// without one, the instant would depend on the server's time zone.
const DATE_TIME_WITH_OFFSET = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-](\d{2}):(\d{2}))$/i;
const EXPIRES_AT_RULE = 'body/expires_at must be an ISO 8601 date-time with an offset (e.g. 2027-01-31T23:59:59Z or 2027-02-01T00:59:59+01:00), or null';

/** The instant an expires_at text names; null for null. Calendar-checked: 2027-02-30 is refused, not rolled over. */
function parseExpiresAt(value: unknown): Date | null {
  if (value === null) return null;
  const m = typeof value === 'string' ? DATE_TIME_WITH_OFFSET.exec(value) : null;
  if (!m) throw badRequest(EXPIRES_AT_RULE);
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const offsetOk = m[9] === undefined || (Number(m[9]) <= 23 && Number(m[10]) <= 59);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 59 || !offsetOk) {
    throw badRequest(EXPIRES_AT_RULE);
  }
  const instant = new Date(value as string);
  // The UTC year stays within what both JS and PostgreSQL write as four digits.
  if (Number.isNaN(instant.getTime()) || instant.getUTCFullYear() < 1 || instant.getUTCFullYear() > 9999) {
    throw badRequest(EXPIRES_AT_RULE);
  }
  return instant;
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
  { repo, baseUrl, adminKey }: { repo: LinkRepository; baseUrl: string; adminKey: string | undefined },
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
  });
  // Before any body or query validation: without the key, nothing else is said.
  const onRequest = requireAdminKey(adminKey);

  app.get(
    '/api/links',
    {
      onRequest,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'Every link, newest first (admin)',
        description: `${BEARER} \`q\` matches the code exactly or the URL as a case-insensitive substring. The total is in X-Total-Count, the other pages in Link.`,
        querystring: ListQuery,
        response: { 200: adminEnvelope(Type.Array(AdminLinkData)), 400: ErrorEnvelope, ...AUTH_ERRORS },
      },
    },
    async (request, reply) => {
      const { page, per_page: perPage } = request.query;
      // An empty q is no filter; PostgreSQL text cannot hold U+0000, so such a search matches nothing and would fail.
      const q = request.query.q === '' ? undefined : request.query.q;
      if (q?.includes('\u0000')) throw badRequest('querystring/q must not contain U+0000');
      const { total, links } = await repo.listForAdmin(q, { limit: perPage, offset: (page - 1) * perPage });
      const lastPage = Math.max(1, Math.ceil(total / perPage));
      void reply.header('x-total-count', String(total)).header('link', linkHeader(q, page, perPage, lastPage));
      return dataEnvelope(200, 'Links retrieved successfully', links.map(toData));
    },
  );

  app.patch(
    '/api/links/:code',
    {
      onRequest,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: "Change a link's expiry, visit limit or disabled flag (admin)",
        description: `${BEARER} Any of expires_at (date-time with offset, or null), max_visits (integer ≥ 1, or null), disabled (boolean); at least one.`,
        params: CodeParams,
        body: PatchBody,
        response: { 200: adminEnvelope(AdminLinkData), 400: ErrorEnvelope, 404: NOT_FOUND, 413: ErrorEnvelope, 415: ErrorEnvelope, ...AUTH_ERRORS },
      },
    },
    async (request) => {
      const { code } = request.params;
      // Rule 4: a malformed code never reaches the database.
      if (!isWellFormedCode(code)) throw notFound('Link not found');
      const body = request.body;
      if (body.expires_at === undefined && body.max_visits === undefined && body.disabled === undefined) {
        throw badRequest('body must contain at least one of expires_at, max_visits, disabled');
      }
      const changes: LifecycleChanges = { disabled: body.disabled };
      if (body.expires_at !== undefined) changes.expiresAt = parseExpiresAt(body.expires_at);
      if (body.max_visits !== undefined) changes.maxVisits = parseMaxVisits(body.max_visits);
      const link = await repo.updateLifecycle(code, changes);
      if (!link) throw notFound('Link not found');
      return dataEnvelope(200, 'Link updated successfully', toData(link));
    },
  );

  app.delete(
    '/api/links/:code',
    {
      onRequest,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'Delete a link; its code is never issued again (admin)',
        description: BEARER,
        params: CodeParams,
        response: { 200: adminEnvelope(AdminLinkData), 404: NOT_FOUND, ...AUTH_ERRORS },
      },
    },
    async (request) => {
      const { code } = request.params;
      if (!isWellFormedCode(code)) throw notFound('Link not found');
      const link = await repo.deleteAndTombstone(code);
      if (!link) throw notFound('Link not found');
      return dataEnvelope(200, 'Link deleted successfully', toData(link));
    },
  );
}

/** RFC 8288 links to the other pages, relative to this route, keeping the search. */
function linkHeader(q: string | undefined, page: number, perPage: number, lastPage: number): string {
  const search = q === undefined ? '' : `q=${encodeURIComponent(q)}&`;
  const link = (n: number, rel: string) => `</api/links?${search}page=${n}&per_page=${perPage}>; rel="${rel}"`;
  const links = [link(1, 'first')];
  if (page > 1) links.push(link(Math.min(page - 1, lastPage), 'prev'));
  if (page < lastPage) links.push(link(page + 1, 'next'));
  links.push(link(lastPage, 'last'));
  return links.join(', ');
}
