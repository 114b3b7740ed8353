import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { App } from '../../kit/http.js';
import { loadWebFile, pageRoute, SHARED_WEB_DIR, sendPage, serveAssets } from '../../web/serve.js';
import { isWellFormedCode, type LinkService } from '../links.js';

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
  '/assets/vendor/uPlot.esm.js': path.join(UPLOT_DIR, 'uPlot.esm.js'),
  '/assets/vendor/uPlot.min.css': path.join(UPLOT_DIR, 'uPlot.min.css'),
};

/**
 * The shortener's web pages: `/` (create), `/stats/<code>`, `/admin`, and their
 * assets under `/assets/`. Registered before the catch-all `/:code` (rule 7);
 * none of these paths is a 7-character code, and codes starting with `admin`,
 * `assets` or `stats` are never issued (reserved-codes.ts).
 */
export async function webPagesRoutes(app: App, { links }: { links: LinkService }): Promise<void> {
  serveAssets(app, SHORTENER_ASSETS);
  const createPage = loadWebFile(path.join(PAGES_DIR, 'index.html'));
  const statsPage = loadWebFile(path.join(PAGES_DIR, 'stats.html'));
  const adminPage = loadWebFile(path.join(PAGES_DIR, 'admin.html'));
  const notFoundPage = loadWebFile(path.join(PAGES_DIR, 'not-found.html'));

  app.get('/', pageRoute, async (_request, reply) => sendPage(reply, createPage));
  app.get('/admin', pageRoute, async (_request, reply) => sendPage(reply, adminPage));
  app.get<{ Params: { code: string } }>('/stats/:code', pageRoute, async (request, reply) => {
    const { code } = request.params;
    // As the API: a malformed code never reaches the database (rule 4); a deleted one is unknown.
    const link = isWellFormedCode(code) ? await links.find(code) : undefined;
    return link ? sendPage(reply, statsPage) : sendPage(reply, notFoundPage, 404);
  });
}
