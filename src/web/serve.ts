import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../kit/http/app.js';
import { pageSecurityHeaders } from '../kit/http/security-headers.js';

// The web pages of the services: plain HTML, ES modules and one stylesheet,
// served as they are in the source tree (no build step). Every file is read
// once at start-up from a fixed list, so a request can only ever name one of
// those files (no path from the URL reaches the file system) and a missing
// file stops the start rather than a page.

/** This folder: the assets every service's pages share (style.css, api.js). */
export const SHARED_WEB_DIR = path.dirname(fileURLToPath(import.meta.url));

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The route options of an HTML page: its own CSP, and out of the API document. */
export const pageRoute = { schema: { hide: true }, config: pageSecurityHeaders } as const;

interface WebFile {
  body: Buffer;
  type: string;
  etag: string;
}

export function loadWebFile(file: string): WebFile {
  const body = readFileSync(file);
  const type = CONTENT_TYPES[path.extname(file)];
  if (!type) throw new Error(`no content type for ${file}`);
  return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
}

/**
 * GET <url> for each entry of `files` (URL path → file). `no-cache`: the
 * browser keeps a copy but asks each time (a 304 when unchanged), so a
 * deployment is seen at once without versioned file names.
 */
export function serveAssets(app: App, files: Readonly<Record<string, string>>): void {
  for (const [url, file] of Object.entries(files)) {
    const asset = loadWebFile(file);
    app.get(url, pageRoute, async (request, reply) => {
      reply.header('cache-control', 'no-cache').header('etag', asset.etag).type(asset.type);
      if (request.headers['if-none-match'] === asset.etag) return reply.code(304).send();
      return reply.send(asset.body);
    });
  }
}

/** Sends an HTML page under the pages' own Content-Security-Policy (set by the route's config). */
export function sendPage(reply: FastifyReply, page: WebFile, status = 200): FastifyReply {
  return reply.code(status).header('cache-control', 'no-cache').type(page.type).send(page.body);
}

/**
 * Whether a request comes from a browser that shows what it gets (its Accept
 * names HTML and not JSON), for an address that answers people with a page and
 * API clients with JSON.
 */
export function wantsPage(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? '';
  return accept.includes('text/html') && !accept.includes('application/json');
}
