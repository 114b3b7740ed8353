import path from 'node:path';
import type { App } from '../kit/http/app.js';
import { pageRoute, SHARED_WEB_DIR, serveAssets, wantsPage } from '../web/serve.js';

// GET / of the identity provider: what this server is and where its API and
// documents are, for whoever opens its address. A browser gets a small page in
// the services' shared look; any other client the same as JSON.

const ABOUT = {
  name: 'idp',
  description: 'A local identity provider speaking the Supabase Auth and PostgREST subset (supabase-js works against it)',
  docs: '/docs',
  endpoints: {
    auth: '/auth/v1',
    rest: '/rest/v1',
    jwks: '/auth/v1/.well-known/jwks.json',
    health: '/healthz',
    readiness: '/readyz',
  },
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Local identity provider</title>
<link rel="icon" href="/assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/assets/style.css">
</head>
<body>
<a class="skip-link" href="#main">Skip to content</a>
<header class="site-header">
  <div class="inner">
    <a class="brand" href="/"><img src="/assets/icon.svg" alt="">Identity provider</a>
  </div>
</header>
<main id="main" class="inner">
  <h1>Local identity provider</h1>
  <div class="card">
    <p>This server speaks the Supabase Auth and PostgREST subset that the notes service and typical Supabase apps use, so <code>@supabase/supabase-js</code> works against it with no cloud account. It has no pages of its own beyond this one: apps call its API with the publishable key as <code>apikey</code>.</p>
    <p><a class="button" href="/docs">API documentation</a></p>
  </div>
  <section class="card" aria-labelledby="endpoints-title">
    <h2 id="endpoints-title">Where things are</h2>
    <dl class="details-list">
      <dt>Auth</dt><dd><code>/auth/v1</code> (sign-up, sign-in, tokens, users, mail links)</dd>
      <dt>REST</dt><dd><code>/rest/v1</code> (tables, under row-level security)</dd>
      <dt>Signing keys</dt><dd><a href="/auth/v1/.well-known/jwks.json">/auth/v1/.well-known/jwks.json</a></dd>
      <dt>Health</dt><dd><a href="/healthz">/healthz</a> and <a href="/readyz">/readyz</a></dd>
    </dl>
  </section>
</main>
<footer class="site-footer">
  <div class="inner">The same answer as JSON: <code>curl -H 'accept: application/json'</code> on this address.</div>
</footer>
</body>
</html>
`;

export async function rootPageRoute(app: App): Promise<void> {
  serveAssets(app, {
    '/assets/style.css': path.join(SHARED_WEB_DIR, 'style.css'),
    '/assets/icon.svg': path.join(SHARED_WEB_DIR, 'icon.svg'),
  });
  app.get('/', pageRoute, async (request, reply) => {
    if (wantsPage(request)) return reply.header('cache-control', 'no-cache').type('text/html; charset=utf-8').send(PAGE);
    return ABOUT;
  });
}
