import { Type } from '@sinclair/typebox';
import { notFound } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { isWellFormedCode, linkState, type LinkService } from '../links.js';
import { CodeParams } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope } from '../../kit/http/status-envelope.js';

export async function linkStatsRoute(app: App, { links }: { links: LinkService }): Promise<void> {
  app.get(
    '/api/links/:code',
    {
      schema: {
        tags: ['links'],
        summary: 'Stats of a short link (never counts a click)',
        params: CodeParams,
        response: {
          200: envelope(
            Type.Object({
              code: Type.String(),
              // Left out for a link with a password: the destination is what the password guards.
              original_url: Type.Optional(Type.String()),
              clicks: Type.Integer(),
              createdAt: Type.String({ format: 'date-time' }),
              // Present only when the link was created with them.
              expires_at: Type.Optional(Type.String({ format: 'date-time' })),
              max_visits: Type.Optional(Type.Integer()),
              password_protected: Type.Optional(Type.Literal(true)),
              state: Type.Union([Type.Literal('active'), Type.Literal('expired'), Type.Literal('exhausted'), Type.Literal('disabled')]),
            }),
          ),
          404: described(ErrorEnvelope, 'No link has this code', { status: 404, response: 'Not Found', message: 'Link not found' }),
        },
      },
    },
    async (request) => {
      const { code } = request.params;
      if (!isWellFormedCode(code)) throw notFound('Link not found');
      const link = await links.find(code);
      if (!link) throw notFound('Link not found');
      return dataEnvelope(200, 'Link stats retrieved successfully', {
        code: link.code,
        ...(link.password_hash === null ? { original_url: link.original_url } : { password_protected: true as const }),
        clicks: link.clicks,
        createdAt: link.created_at.toISOString(),
        ...(link.expires_at !== null && { expires_at: link.expires_at.toISOString() }),
        ...(link.max_visits !== null && { max_visits: link.max_visits }),
        state: linkState(link, links.now()),
      });
    },
  );
}
