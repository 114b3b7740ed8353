import { Counter, Histogram } from 'prom-client';
import type { App } from '../kit/http/app.js';
import { metricsRegistry } from '../kit/http/metrics.js';
import { isWellFormedCode } from './links.js';

// The shortener's own figures. Outcomes are read from the answer each route
// gave (its status), so the routes themselves carry no metrics code; the code
// a visitor asked for is never a label, only which kind of answer it got.

const REDIRECT_ROUTE = '/:code';
const CREATE_ROUTE = '/api/links';

function redirectOutcome(status: number, code: string): string {
  if (status === 302) return 'redirected';
  if (status === 410) return 'gone';
  if (status === 404) return isWellFormedCode(code) ? 'not_found' : 'malformed';
  if (status === 503) return 'unavailable';
  return status >= 500 ? 'error' : 'other';
}

/** Registers the shortener's metrics on the app; returns what the click counter reports each batch to. */
export function installShortenerMetrics(app: App): { observeClickBatch: (clicks: number) => void } {
  const redirects = new Counter({
    name: 'shortener_redirects_total',
    help: 'GET /:code answers by outcome: redirected, gone (expired, max_visits reached or disabled), not_found, malformed, unavailable, error (HEAD, a look rather than a visit, is not counted).',
    labelNames: ['outcome'] as const,
    registers: [metricsRegistry(app)],
  });
  const rateLimited = new Counter({
    name: 'rate_limited_requests_total',
    help: 'Requests refused with 429, by limiter.',
    labelNames: ['limiter'] as const,
    registers: [metricsRegistry(app)],
  });
  const clickBatches = new Histogram({
    name: 'shortener_click_batch_size',
    help: 'Visits written by one UPDATE of the click counter, unknown codes included (grows with concurrent redirects).',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
    registers: [metricsRegistry(app)],
  });
  // Series that exist from the start read 0 rather than missing until the first event.
  for (const outcome of ['redirected', 'gone', 'not_found', 'malformed', 'unavailable', 'error']) redirects.inc({ outcome }, 0);
  rateLimited.inc({ limiter: 'shortener_create' }, 0);

  // Synchronous (done): an async hook would cost every redirect a promise.
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url;
    if (route === REDIRECT_ROUTE && request.method === 'GET') {
      redirects.inc({ outcome: redirectOutcome(reply.statusCode, (request.params as { code: string }).code) });
    } else if (route === CREATE_ROUTE && reply.statusCode === 429) {
      rateLimited.inc({ limiter: 'shortener_create' });
    }
    done();
  });

  return { observeClickBatch: (clicks) => clickBatches.observe(clicks) };
}
