import { Type } from '@sinclair/typebox';
import { notFound } from '../../kit/errors.js';
import type { App } from '../../kit/http.js';
import { isWellFormedCode, type LinkService } from '../links.js';
import { CodeParams, ErrorEnvelope, envelope } from './schemas.js';

export function linkStatsRoute(app: App, links: LinkService): void {
  app.get(
    '/api/links/:code',
    {
      schema: {
        summary: 'Stats of a short link (never counts a click)',
        params: CodeParams,
        response: {
          200: envelope(
            Type.Object({
              code: Type.String(),
              original_url: Type.String(),
              clicks: Type.Integer(),
              createdAt: Type.String({ format: 'date-time' }),
            }),
          ),
          404: ErrorEnvelope,
        },
      },
    },
    async (request) => {
      const { code } = request.params;
      if (!isWellFormedCode(code)) throw notFound('Link not found');
      const link = await links.find(code);
      if (!link) throw notFound('Link not found');
      return {
        status: 200,
        response: 'OK',
        message: 'Link stats retrieved successfully',
        data: { code: link.code, original_url: link.original_url, clicks: link.clicks, createdAt: link.created_at.toISOString() },
      };
    },
  );
}
