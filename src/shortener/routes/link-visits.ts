import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { isWellFormedCode, linkState, type LinkService } from '../links.js';
import { parseVisitQuery } from '../visit-report.js';
import { CodeParams, LINK_MANAGER_ERRORS, MANAGER_SECURITY } from './schemas.js';
import { type Access, requireManager } from '../access.js';
import type { LinkRepository } from '../repository.js';
import { dataEnvelope, envelope, ErrorEnvelope } from '../../kit/http/status-envelope.js';

const NamedCounts = Type.Array(Type.Object({ name: Type.String(), visits: Type.Integer() }));

const VisitsData = Type.Object({
  code: Type.String(),
  state: Type.String(),
  from: Type.String({ format: 'date-time' }),
  to: Type.String({ format: 'date-time' }),
  interval: Type.String(),
  totals: Type.Object({
    visits: Type.Integer(),
    humans: Type.Integer(),
    bots: Type.Integer(),
    previews: Type.Integer(),
    unique_visitors: Type.Integer(),
  }),
  series: Type.Array(Type.Object({ start: Type.String({ format: 'date-time' }), visits: Type.Integer(), humans: Type.Integer() })),
  referrers: NamedCounts,
  browsers: NamedCounts,
  operating_systems: NamedCounts,
  devices: NamedCounts,
  countries: Type.Array(
    Type.Object({
      name: Type.Union([Type.String({ description: 'ISO 3166-1 alpha-2' }), Type.Null({ description: 'not known' })]),
      visits: Type.Integer(),
    }),
  ),
});

export async function linkVisitsRoute(
  app: App,
  { links, repo, access }: { links: LinkService; repo: LinkRepository; access: Access },
): Promise<void> {
  // Credentials before the query is validated: without them nothing else is said.
  const manager = requireManager(access, repo, isWellFormedCode, false);
  app.get(
    '/api/links/:code/visits',
    {
      onRequest: manager.hook,
      schema: {
        tags: ['analytics'],
        summary: 'Visits of a short link over time, by traffic class, referrer, browser, OS, device and country (its manager only)',
        description:
          "Needs `Authorization: Bearer` with the link's manage token (returned once by the create), the API key that created it, a manager API key or the admin key. The public stats (`GET /api/links/{code}`) stay open.",
        security: MANAGER_SECURITY,
        params: CodeParams,
        querystring: Type.Object({
          from: Type.Optional(Type.String({ description: 'ISO 8601 date or timestamp with offset; default: 30 days before to' })),
          to: Type.Optional(Type.String({ description: 'ISO 8601 date or timestamp with offset; default: now' })),
          interval: Type.Optional(Type.String({ description: 'hour (ranges up to 31 days) or day (up to 366 days); default: day' })),
        }),
        response: {
          200: envelope(VisitsData),
          400: described(ErrorEnvelope, 'from, to or interval is malformed, or the range is too long for the interval', {
            status: 400,
            response: 'Bad Request',
            message: 'interval must be "hour" or "day"',
          }),
          ...LINK_MANAGER_ERRORS,
        },
      },
    },
    async (request) => {
      const { code } = request.params;
      const { link } = manager.managed(request);
      const now = links.now();
      const range = parseVisitQuery(request.query, now);
      const report = await links.visits(code, range);
      return dataEnvelope(200, 'Link visits retrieved successfully', { code, state: linkState(link, now), ...report });
    },
  );
}
