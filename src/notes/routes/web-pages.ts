import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { App } from '../../kit/http/app.js';
import { loadWebFile, pageRoute, SHARED_WEB_DIR, sendPage, serveAssets } from '../../web/serve.js';

const PAGES_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');

/** Every file served under `/assets/`, by its path: the shared look and the app's scripts. */
export const NOTES_ASSETS: Readonly<Record<string, string>> = {
  '/assets/style.css': path.join(SHARED_WEB_DIR, 'style.css'),
  '/assets/api.js': path.join(SHARED_WEB_DIR, 'api.js'),
  '/assets/icon.svg': path.join(SHARED_WEB_DIR, 'icon.svg'),
  '/assets/notes/session.js': path.join(PAGES_DIR, 'session.js'),
  '/assets/notes/notes.js': path.join(PAGES_DIR, 'notes.js'),
  '/assets/notes/forgot-password.js': path.join(PAGES_DIR, 'forgot-password.js'),
  '/assets/notes/reset-password.js': path.join(PAGES_DIR, 'reset-password.js'),
  '/assets/notes/confirm.js': path.join(PAGES_DIR, 'confirm.js'),
};

/**
 * The notes web app: `/` (sign in or up, then the caller's notes),
 * `/forgot-password` and `/reset-password` (where the provider's recovery link
 * lands), `/confirm` (where a sign-up's confirmation link lands), and their
 * assets under `/assets/`. Same origin as the API, so the
 * pages call it without CORS; the API routes and their policy are unchanged.
 */
export async function webPagesRoutes(app: App): Promise<void> {
  serveAssets(app, NOTES_ASSETS);
  const pages: Record<string, ReturnType<typeof loadWebFile>> = {
    '/': loadWebFile(path.join(PAGES_DIR, 'index.html')),
    '/forgot-password': loadWebFile(path.join(PAGES_DIR, 'forgot-password.html')),
    '/reset-password': loadWebFile(path.join(PAGES_DIR, 'reset-password.html')),
    '/confirm': loadWebFile(path.join(PAGES_DIR, 'confirm.html')),
  };
  for (const [url, page] of Object.entries(pages)) {
    app.get(url, pageRoute, async (_request, reply) => sendPage(reply, page));
  }
}
