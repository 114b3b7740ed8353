import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply } from 'fastify';
import type { App } from '../../kit/http/app.js';
import { pageSecurityHeaders } from '../../kit/http/security-headers.js';
import { loadWebFile, pageRoute, SHARED_WEB_DIR, sendPage, serveAssets } from '../../web/serve.js';
import { isWellFormedCode, type LinkService } from '../links.js';
import type { Refusal } from '../repository.js';

const PAGES_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');
// uPlot's own files, from the installed package: no CDN, no copy in the tree.
const UPLOT_DIR = path.dirname(createRequire(import.meta.url).resolve('uplot/dist/uPlot.esm.js'));

/** Every file served under `/assets/`, by its path: the shared look, the pages' scripts and uPlot. */
export const SHORTENER_ASSETS: Readonly<Record<string, string>> = {
  '/assets/style.css': path.join(SHARED_WEB_DIR, 'style.css'),
  '/assets/api.js': path.join(SHARED_WEB_DIR, 'api.js'),
  '/assets/icon.svg': path.join(SHARED_WEB_DIR, 'icon.svg'),
  '/assets/shortener/create.js': path.join(PAGES_DIR, 'create.js'),
  '/assets/shortener/stats.js': path.join(PAGES_DIR, 'stats.js'),
  '/assets/shortener/admin.js': path.join(PAGES_DIR, 'admin.js'),
  '/assets/shortener/links.js': path.join(PAGES_DIR, 'links.js'),
  '/assets/shortener/link-words.js': path.join(PAGES_DIR, 'link-words.js'),
  '/assets/shortener/csv-file.js': path.join(PAGES_DIR, 'csv-file.js'),
  '/assets/vendor/uPlot.esm.js': path.join(UPLOT_DIR, 'uPlot.esm.js'),
  '/assets/vendor/uPlot.min.css': path.join(UPLOT_DIR, 'uPlot.min.css'),
};

/** Why a short link leads nowhere: no link has its code (or it is malformed), or the link refuses. */
export type DeadLinkReason = 'unknown' | Refusal;

const DEAD_LINK_TEMPLATE = readFileSync(path.join(PAGES_DIR, 'dead-link.html'), 'utf8');
const UTC_INSTANT = new Intl.DateTimeFormat('en-GB', { dateStyle: 'long', timeStyle: 'short', timeZone: 'UTC' });

function deadLinkWords(reason: DeadLinkReason, limits?: { expires_at: Date | null; max_visits: number | null }): [string, string] {
  const end = 'so it no longer leads anywhere.';
  if (reason === 'disabled') return ['Link disabled', `This short link has been disabled by the people who run this service, ${end}`];
  if (reason === 'expired') {
    const when = limits?.expires_at ? ` on ${UTC_INSTANT.format(limits.expires_at)} UTC` : '';
    return ['Link expired', `This short link expired${when}, ${end}`];
  }
  if (reason === 'exhausted') {
    const visits = limits?.max_visits ?? 0;
    return [
      'Link used up',
      `This short link allowed ${visits.toLocaleString('en')} visit${visits === 1 ? '' : 's'}, and all of them have been used, ${end}`,
    ];
  }
  return ['Link not found', 'There is no short link with this code. It may have been mistyped, or deleted.'];
}

/** The page that says why a short link leads nowhere. Its text is fixed here (dates and counts included): nothing from the request. */
export function deadLinkPage(reason: DeadLinkReason, limits?: { expires_at: Date | null; max_visits: number | null }): string {
  const [title, message] = deadLinkWords(reason, limits);
  return DEAD_LINK_TEMPLATE.replaceAll('{{title}}', title).replace('{{message}}', message);
}

/**
 * A dead link's page, 404 or 410, under the pages' policy. Never stored: a
 * disabled link may be enabled again, and a cached answer would hide that.
 */
export function sendDeadLinkPage(
  reply: FastifyReply,
  reason: DeadLinkReason,
  limits?: { expires_at: Date | null; max_visits: number | null },
): FastifyReply {
  return reply
    .code(reason === 'unknown' ? 404 : 410)
    .header('cache-control', 'no-store')
    .header('content-security-policy', pageSecurityHeaders.contentSecurityPolicy)
    .type('text/html; charset=utf-8')
    .send(deadLinkPage(reason, limits));
}

const UNLOCK_TEMPLATE = readFileSync(path.join(PAGES_DIR, 'unlock-link.html'), 'utf8');

/**
 * The password page's policy: the pages' own, without `form-action`. Browsers check form-action
 * on the redirect that answers a form too, and the right password answers with a 302 to the
 * link's destination, anywhere on the web; the page's only form posts to the service itself.
 */
export const UNLOCK_PAGE_POLICY = (pageSecurityHeaders.contentSecurityPolicy ?? '')
  .split(';')
  .filter((directive) => !directive.startsWith('form-action'))
  .join(';');

/** Why the password page is shown again: nothing yet, a wrong password, or too many of them. */
export type UnlockProblem = { kind: 'required' } | { kind: 'wrong' } | { kind: 'limited'; retryAfterSeconds: number };

function unlockWords(problem: UnlockProblem): string | undefined {
  if (problem.kind === 'wrong') return 'That password is not right. Check it and try again.';
  if (problem.kind === 'limited') {
    const minutes = Math.ceil(problem.retryAfterSeconds / 60);
    return `Too many wrong passwords for this link: try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
  }
  return undefined;
}

/**
 * The page that asks for a link's password. Its text is fixed here; the code in the form's
 * action is a well-formed code (letters, digits, - and _ only), relative to the page's own URL so
 * the page works under any BASE_URL path; `from` is a host name of a-z, 0-9, '.' and '-' only.
 */
export function unlockPage(code: string, problem: UnlockProblem, from: string): string {
  const words = unlockWords(problem);
  return UNLOCK_TEMPLATE.replace('{{action}}', code)
    .replace('{{from}}', from)
    .replace('{{describedby}}', words ? ' aria-describedby="password-error" aria-invalid="true"' : '')
    .replace('{{error}}', words ? `<span id="password-error" class="field-error" role="alert">${words}</span>` : '');
}

/**
 * The password page, 403 (or 429 after too many guesses), never stored. `from` is the host the
 * visitor came from (a checked host name, or '' for none), carried by the form so that the visit
 * counted on the right password records it rather than the password page itself.
 */
export function sendUnlockPage(reply: FastifyReply, code: string, problem: UnlockProblem, from: string): FastifyReply {
  if (problem.kind === 'limited') void reply.header('retry-after', String(problem.retryAfterSeconds));
  return reply
    .code(problem.kind === 'limited' ? 429 : 403)
    .header('cache-control', 'no-store')
    .header('content-security-policy', UNLOCK_PAGE_POLICY)
    .type('text/html; charset=utf-8')
    .send(unlockPage(code, problem, from));
}

/**
 * The shortener's web pages: `/` (create), `/stats/<code>`, `/admin`, `/links`, and their
 * assets under `/assets/`. Registered before the catch-all `/:code` (rule 7);
 * none of these paths is a 7-character code, and codes starting with `admin`,
 * `assets` or `stats` are never issued (reserved-codes.ts).
 */
export async function webPagesRoutes(app: App, { links }: { links: LinkService }): Promise<void> {
  serveAssets(app, SHORTENER_ASSETS);
  const createPage = loadWebFile(path.join(PAGES_DIR, 'index.html'));
  const statsPage = loadWebFile(path.join(PAGES_DIR, 'stats.html'));
  const adminPage = loadWebFile(path.join(PAGES_DIR, 'admin.html'));
  const linksPage = loadWebFile(path.join(PAGES_DIR, 'links.html'));

  app.get('/', pageRoute, async (_request, reply) => sendPage(reply, createPage));
  app.get('/admin', pageRoute, async (_request, reply) => sendPage(reply, adminPage));
  // "My links": an API key's links. `links` is a GET route at one segment, so no code is ever issued for it.
  app.get('/links', pageRoute, async (_request, reply) => sendPage(reply, linksPage));
  app.get<{ Params: { code: string } }>('/stats/:code', pageRoute, async (request, reply) => {
    const { code } = request.params;
    // As the API: a malformed code never reaches the database (rule 4); a deleted one is unknown.
    const link = isWellFormedCode(code) ? await links.find(code) : undefined;
    return link ? sendPage(reply, statsPage) : sendDeadLinkPage(reply, 'unknown');
  });
}
