import { Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { ErrorEnvelope } from '../../kit/http/status-envelope.js';
import { type Access, CREDENTIALS_REQUIRED, type Principal, requireManager } from '../access.js';
import { csvRow, type CsvValue } from '../csv.js';
import { isWellFormedCode } from '../links.js';
import type { Link, LinkRepository, VisitExportRow } from '../repository.js';
import { ADMIN_SECURITY, CodeParams, LINK_MANAGER_ERRORS, MANAGER_SECURITY } from './schemas.js';

/** Rows read per statement: the export holds one page in memory, never the whole list. */
export const EXPORT_PAGE_SIZE = 500;

const FormatQuery = Type.Object(
  { format: Type.Union([Type.Literal('csv'), Type.Literal('json')], { default: 'csv', description: 'csv (default) or json' }) },
  { additionalProperties: false },
);

const FORMAT_REFUSED = described(ErrorEnvelope, 'format is neither csv nor json', {
  status: 400,
  response: 'Bad Request',
  message: 'querystring/format must be equal to constant',
});

const FILE = Type.Unsafe<string>({
  type: 'string',
  description:
    'A download (Content-Disposition: attachment): text/csv with a header row (RFC 4180; a cell starting with = + - @ tab CR or an apostrophe gets a leading apostrophe), or application/json, an array',
});

// Columns added later go at the end, so a program that reads the earlier ones by position still reads them.
const LINK_COLUMNS = [
  'code',
  'short_url',
  'original_url',
  'clicks',
  'created_at',
  'expires_at',
  'max_visits',
  'disabled',
  'title',
  'tags',
  'password_protected',
];
const VISIT_COLUMNS = ['hour', 'class', 'referrer', 'browser', 'os', 'device', 'visits', 'country'];

/**
 * Every row, one page read at a time as the client takes them (Readable.from pulls on demand).
 * The first page is read before anything is sent, so a database that fails at once is the
 * usual 503, not a download cut after its status.
 */
async function rowsOf<T>(nextPage: (last: T | undefined) => Promise<T[]>): Promise<AsyncGenerator<T>> {
  const first = await nextPage(undefined);
  return (async function* () {
    let page = first;
    for (;;) {
      yield* page;
      if (page.length < EXPORT_PAGE_SIZE) return;
      page = await nextPage(page[page.length - 1]);
    }
  })();
}

/** The rows as a CSV file with its header, or a JSON array, produced as the client reads. */
async function* fileOf<T>(
  format: 'csv' | 'json',
  header: string[],
  rows: AsyncGenerator<T>,
  cells: (row: T) => Record<string, CsvValue | string[]>,
) {
  if (format === 'csv') {
    yield csvRow(header);
    for await (const row of rows) {
      const values = cells(row);
      yield csvRow(
        header.map((name) => {
          const v = values[name]!;
          return Array.isArray(v) ? v.join(' ') : v;
        }),
      );
    }
    return;
  }
  yield '[';
  let first = true;
  for await (const row of rows) {
    yield `${first ? '' : ','}\n${JSON.stringify(cells(row))}`;
    first = false;
  }
  yield '\n]\n';
}

function sendFile(reply: FastifyReply, format: 'csv' | 'json', name: string, body: AsyncGenerator<string>) {
  return (
    reply
      .type(format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8')
      .header('content-disposition', `attachment; filename="${name}.${format}"`)
      // Links and visits of their managers only: no shared cache may keep them.
      .header('cache-control', 'no-store')
      .send(Readable.from(body))
  );
}

export async function exportLinksRoutes(
  app: App,
  { repo, baseUrl, access }: { repo: LinkRepository; baseUrl: string; access: Access },
): Promise<void> {
  const exporters = new WeakMap<FastifyRequest, Principal>();
  const linkCells = (link: Link) => ({
    code: link.code,
    short_url: `${baseUrl}/${link.code}`,
    original_url: link.original_url,
    clicks: link.clicks,
    created_at: link.created_at.toISOString(),
    expires_at: link.expires_at?.toISOString() ?? null,
    max_visits: link.max_visits,
    disabled: link.disabled,
    title: link.title,
    tags: link.tags,
    password_protected: link.password_hash !== null,
  });

  app.get(
    '/api/links/export',
    {
      // As the listing: credentials first, without a query when they are nothing; a manage token lists nothing.
      onRequest: async (request) => {
        const principal = await access.require(request, true);
        if (principal.kind === 'token') throw access.refusal(undefined, true);
        exporters.set(request, principal);
      },
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'Download the links the caller manages, newest first, as CSV or JSON',
        description:
          'Needs `Authorization: Bearer` with SHORTENER_ADMIN_KEY or an API key: every link for the admin and manager keys, its own for an author key. Columns: ' +
          `${LINK_COLUMNS.join(', ')} (tags separated by spaces in CSV).`,
        querystring: FormatQuery,
        produces: ['text/csv', 'application/json'],
        response: {
          200: FILE,
          400: FORMAT_REFUSED,
          401: described(ErrorEnvelope, 'No credentials, or not an API key nor the admin key (WWW-Authenticate: Bearer)', {
            status: 401,
            response: 'Unauthorized',
            message: CREDENTIALS_REQUIRED,
          }),
          503: described(
            ErrorEnvelope,
            'The admin API is off (SHORTENER_ADMIN_KEY is not set) and no key was offered, or the database is unavailable',
            {
              status: 503,
              response: 'Service Unavailable',
              message: 'Admin API is not configured: set SHORTENER_ADMIN_KEY',
            },
          ),
        },
      },
    },
    async (request, reply) => {
      const principal = exporters.get(request)!;
      const owner = principal.kind === 'key' && principal.key.role === 'author' ? principal.key.id : null;
      const rows = await rowsOf<Link & { position: string }>((last) =>
        repo.exportPage(owner, last && { createdAt: last.position, code: last.code }, EXPORT_PAGE_SIZE),
      );
      return sendFile(reply, request.query.format, 'links', fileOf(request.query.format, LINK_COLUMNS, rows, linkCells));
    },
  );

  // The same rule as the visit detail: the link's manager, credentials before anything else.
  const manager = requireManager(access, repo, isWellFormedCode, false);
  app.get(
    '/api/links/:code/visits/export',
    {
      onRequest: manager.hook,
      schema: {
        tags: ['analytics'],
        security: MANAGER_SECURITY,
        summary: "Download a link's hourly visit rows as CSV or JSON (its manager only)",
        description:
          "Needs `Authorization: Bearer` with the link's manage token, the API key that created it, a manager API key or the admin key. " +
          `One row per UTC hour, traffic class, referrer host, browser, OS, device and country, with its count, oldest first. Columns: ${VISIT_COLUMNS.join(', ')}.`,
        params: CodeParams,
        querystring: FormatQuery,
        produces: ['text/csv', 'application/json'],
        response: {
          200: FILE,
          400: FORMAT_REFUSED,
          ...LINK_MANAGER_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const { code } = request.params;
      const rows = await rowsOf<VisitExportRow>((last) => repo.visitExportPage(code, last, EXPORT_PAGE_SIZE));
      const cells = (row: VisitExportRow) => ({
        hour: row.hour.toISOString(),
        class: row.class,
        referrer: row.referrer,
        browser: row.browser,
        os: row.os,
        device: row.device,
        visits: row.visits,
        // '' in the table: not known (an empty cell in CSV, null in JSON).
        country: row.country === '' ? null : row.country,
      });
      return sendFile(reply, request.query.format, `visits-${code}`, fileOf(request.query.format, VISIT_COLUMNS, rows, cells));
    },
  );
}
