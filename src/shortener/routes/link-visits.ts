import { Type } from '@sinclair/typebox';
import { notFound } from '../../kit/errors.js';
import type { App } from '../../kit/http.js';
import { described } from '../../kit/openapi.js';
import { isWellFormedCode, linkState, type LinkService } from '../links.js';
import { parseVisitQuery } from '../visit-report.js';
import { CodeParams } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope } from '../../kit/status-envelope.js';

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
});

export async function linkVisitsRoute(app: App, { links }: { links: LinkService }): Promise<void> {
  app.get(
    '/api/links/:code/visits',
    {
      schema: {
        tags: ['analytics'],
        summary: 'Visits of a short link over time, by traffic class, referrer, browser, OS and device',
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
          404: described(ErrorEnvelope, 'No link has this code', { status: 404, response: 'Not Found', message: 'Link not found' }),
          503: ErrorEnvelope,
        },
      },
    },
    async (request) => {
      const { code } = request.params;
      // Rule 4: a malformed code never reaches the database.
      if (!isWellFormedCode(code)) throw notFound('Link not found');
      const now = links.now();
      const range = parseVisitQuery(request.query, now);
      const link = await links.find(code);
      if (!link) throw notFound('Link not found');
      const report = await links.visits(code, range);
      return dataEnvelope(200, 'Link visits retrieved successfully', { code, state: linkState(link, now), ...report });
    },
  );
}
