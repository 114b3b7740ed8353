import { isDatabaseUnavailable } from '../../kit/db.js';
import { notFound, serviceUnavailable } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { gone, isWellFormedCode, linkState, type LinkService } from '../links.js';
import type { Refusal } from '../repository.js';
import { CodeParams } from './schemas.js';
import { ErrorEnvelope } from '../../kit/http/status-envelope.js';
import { wantsPage } from '../../web/serve.js';
import { sendDeadLinkPage } from './web-pages.js';

/** The catch-all `/:code`: registered last among the routes (rule 7). */
export async function redirectRoute(app: App, { links }: { links: LinkService }): Promise<void> {
  app.get(
    '/:code',
    {
      schema: {
        tags: ['redirect'],
        summary:
          'Redirect to the original URL and count the click with its visit (HEAD does not count); 410 once the link expired, reached max_visits or was disabled',
        params: CodeParams,
        response: {
          // reply.redirect sends no body, so this schema never serialises anything: it documents the answer.
          302: {
            type: 'null',
            description: 'Redirect to the original URL; the click is counted (Cache-Control: no-store, so every visit comes back)',
            headers: { Location: { type: 'string', format: 'uri', description: 'The original URL' } },
          },
          404: described(
            ErrorEnvelope,
            'No link has this code (Cache-Control: no-store). A browser (Accept naming text/html, not JSON) gets a page saying so instead',
            { status: 404, response: 'Not Found', message: 'Link not found' },
          ),
          410: described(
            ErrorEnvelope,
            'The link expired, reached max_visits or was disabled (Cache-Control: no-store, since it may come back). A browser gets a page saying which instead',
            {
              status: 410,
              response: 'Gone',
              message: 'This link expired at 2027-01-31T23:59:59.000Z',
            },
          ),
        },
      },
    },
    async (request, reply) => {
      const { code } = request.params;
      /** A link that leads nowhere: a page for a browser, the envelope for an API client; never cached, since a link can come back. */
      const dead = (reason: 'unknown' | Refusal, limits?: { expires_at: Date | null; max_visits: number | null }) => {
        if (wantsPage(request)) return sendDeadLinkPage(reply, reason, limits);
        reply.header('cache-control', 'no-store');
        throw reason === 'unknown' ? notFound('Link not found') : gone(reason, limits!);
      };
      // Before anything else: a malformed code never reaches the database (rule 4).
      if (!isWellFormedCode(code)) return dead('unknown');
      let target: string;
      if (request.method === 'HEAD') {
        // HEAD is a look, not a visit (link checkers, previews): answer alike, count nothing.
        const link = await links.find(code);
        if (!link) return dead('unknown');
        const state = linkState(link, links.now());
        if (state !== 'active') return dead(state, link);
        target = links.destination(link, request.headers['user-agent']);
      } else {
        let outcome: Awaited<ReturnType<typeof links.follow>>;
        try {
          outcome = await links.follow(code, {
            ip: request.ip,
            userAgent: request.headers['user-agent'],
            referer: request.headers.referer,
          });
        } catch (err) {
          // The batch's statement failed as a whole: neither this click nor its
          // visit was written, so the visitor may simply try again. An
          // unreachable database takes the central handler's usual path.
          if (isDatabaseUnavailable(err)) throw err;
          request.log.error({ err: { message: (err as Error).message, code: (err as { code?: string }).code } }, 'click batch failed');
          throw serviceUnavailable();
        }
        if (outcome === undefined) return dead('unknown');
        if (!outcome.counted) return dead(outcome.refusal, outcome);
        target = outcome.url;
      }
      // 302, not 301, and no-store: every visit must reach the service to be counted (rule 5).
      // URL.href is the header-safe (ASCII) form of the stored URL.
      return reply.header('cache-control', 'no-store').redirect(new URL(target).href, 302);
    },
  );
}
