import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { App } from '../../kit/http/app.js';
import { loadWebFile, pageRoute, SHARED_WEB_DIR, sendPage, serveAssets } from '../../web/serve.js';

const PAGES_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');

/** Each page's path and its file in src/accounts/web/. */
export const ACCOUNTS_PAGES: Record<string, string> = {
  '/': 'index.html',
  '/register': 'register.html',
  '/account': 'account.html',
  '/admin': 'admin.html',
  '/reset-password': 'reset-password.html',
  '/verify-email': 'verify-email.html',
};

/** Only when EMAIL_SIGNIN is on (off, the path is 404 like any unknown one). */
const EMAIL_SIGNIN_PAGE = { '/email-signin': 'email-signin.html' };

const SCRIPTS = [
  'email-signin.js',
  'session.js',
  'fragment.js',
  'confirm-dialog.js',
  'signin.js',
  'register.js',
  'account.js',
  'admin.js',
  'reset-password.js',
  'verify-email.js',
];

/** Every file served under `/assets/`, by its path: the shared look and the pages' scripts. */
export const ACCOUNTS_ASSETS: Readonly<Record<string, string>> = {
  '/assets/style.css': path.join(SHARED_WEB_DIR, 'style.css'),
  '/assets/api.js': path.join(SHARED_WEB_DIR, 'api.js'),
  '/assets/icon.svg': path.join(SHARED_WEB_DIR, 'icon.svg'),
  ...Object.fromEntries(SCRIPTS.map((file) => [`/assets/accounts/${file}`, path.join(PAGES_DIR, file)])),
};

/**
 * The accounts service's web pages (docs/accounts.md, "Web pages") and their
 * assets under /assets/. None of these paths is an API path: the API lives
 * under /auth/, /admin/users, /admin/audit and /.well-known/.
 */
export async function webPagesRoutes(app: App, { emailSignin = false }: { emailSignin?: boolean } = {}): Promise<void> {
  serveAssets(app, ACCOUNTS_ASSETS);
  const pages = emailSignin ? { ...ACCOUNTS_PAGES, ...EMAIL_SIGNIN_PAGE } : ACCOUNTS_PAGES;
  for (const [url, file] of Object.entries(pages)) {
    const page = loadWebFile(path.join(PAGES_DIR, file));
    app.get(url, pageRoute, async (_request, reply) => sendPage(reply, page));
  }
}
