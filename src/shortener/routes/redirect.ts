import { notFound } from '../../kit/errors.js';
import type { App } from '../../kit/http.js';
import { isWellFormedCode, type LinkService } from '../links.js';
import { CodeParams, ErrorEnvelope } from './schemas.js';

/** The catch-all `/:code`: registered last among the routes (rule 7). */
export function redirectRoute(app: App, links: LinkService): void {
  app.get(
    '/:code',
    {
      schema: {
        summary: 'Redirect to the original URL and count the click (HEAD does not count)',
        params: CodeParams,
        response: { 404: ErrorEnvelope },
      },
    },
    async (request, reply) => {
      const { code } = request.params;
      // Before anything else: a malformed code never reaches the database (rule 4).
      if (!isWellFormedCode(code)) throw notFound('Link not found');
      // HEAD is a look, not a visit (link checkers, previews): answer alike, count nothing.
      const target = request.method === 'HEAD' ? (await links.find(code))?.original_url : await links.follow(code);
      if (target === undefined) throw notFound('Link not found');
      // 302, not 301, and no-store: every visit must reach the service to be counted (rule 5).
      // URL.href is the header-safe (ASCII) form of the stored URL.
      return reply.header('cache-control', 'no-store').redirect(new URL(target).href, 302);
    },
  );
}
