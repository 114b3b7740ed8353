import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { type Clock, systemClock } from '../kit/clock.js';
import type { Pool } from '../kit/db.js';
import { type App, buildHttpApp } from '../kit/http.js';
import { statusEnvelope } from '../kit/status-envelope.js';
import { type HttpVariable, httpSettings } from '../kit/http-limits.js';
import { type CounterStore, FixedWindowLimiter, MemoryCounterStore, RedisCounterStore } from '../kit/rate-limit.js';
import { type CodeGenerator, randomCode } from './codes.js';
import type { ShortenerConfig } from './config.js';
import { LinkService } from './links.js';
import { installShortenerMetrics } from './metrics.js';
import { LinkRepository } from './repository.js';
import { createLinkRoute } from './routes/create-link.js';
import { linkStatsRoute } from './routes/link-stats.js';
import { linkVisitsRoute } from './routes/link-visits.js';
import { redirectRoute } from './routes/redirect.js';
import { isReservedCode } from './reserved-codes.js';
import { adminLinksRoutes } from './routes/admin-links.js';
import { SHORTENER_DOCUMENT } from './routes/schemas.js';
import { linkQrRoute } from './routes/link-qr.js';
import { webPagesRoutes } from './routes/web-pages.js';

export const CREATE_LIMIT = { max: 10, windowMs: 60_000 };
/** How often past days' visitor salts are deleted (a visit on a new day deletes them too) and past days' visits rolled up. */
const SALT_SWEEP_MS = 10 * 60_000;

export interface ShortenerDeps {
  pool: Pool;
  /** Shared counters for N instances; without it, counters live in this process. */
  redis?: Redis;
  clock?: Clock;
  generateCode?: CodeGenerator;
  logStream?: Writable;
}

export async function buildApp(
  config: Pick<ShortenerConfig, 'BASE_URL' | 'LOG_LEVEL' | 'TRUST_PROXY' | 'RATE_LIMIT_IPV6_PREFIX' | 'METRICS_TOKEN' | 'SHORTENER_ADMIN_KEY' | 'OPENAPI_RESPONSE_CHECK' | HttpVariable>,
  deps: ShortenerDeps,
): Promise<App> {
  const clock = deps.clock ?? systemClock;
  const app = await buildHttpApp({
    title: 'Link shortener',
    description: 'Short codes, counted 302 redirects, stats, per-IP rate limit on create.',
    logLevel: config.LOG_LEVEL,
    logStream: deps.logStream,
    // Nothing the service keeps or prints can tell who visited a link (docs/shortener.md, Visit analytics).
    logClientAddresses: false,
    trustProxy: config.TRUST_PROXY,
    errorBody: statusEnvelope,
    document: SHORTENER_DOCUMENT,
    http: httpSettings(config),
    responseCheck: config.OPENAPI_RESPONSE_CHECK,
    readiness: async () => {
      await deps.pool.query('SELECT 1');
    },
    metrics: { token: config.METRICS_TOKEN, pools: { main: deps.pool } },
  });

  const memory = new MemoryCounterStore(clock);
  const store: CounterStore = deps.redis
    ? new RedisCounterStore(deps.redis, 'shortener:create:', memory, clock, (m) => app.log.warn(m))
    : memory;
  const createLimiter = new FixedWindowLimiter(CREATE_LIMIT.max, CREATE_LIMIT.windowMs, store, clock);
  app.addHook('onClose', async () => memory.close());

  const { observeClickBatch } = installShortenerMetrics(app);
  // Every GET route of the service (healthz, metrics) is a code never issued,
  // nor one that starts like a page the service serves (reserved-codes.ts).
  const repo = new LinkRepository(deps.pool);
  const links = new LinkService(
    repo,
    deps.generateCode ?? randomCode,
    (code) => isReservedCode(code) || app.hasRoute({ method: 'GET', url: `/${code}` }),
    clock,
    observeClickBatch,
  );
  // A day's visitor salt must go once the day is over, even when no visit comes to replace it;
  // and the days that are over are rolled up for the visits report.
  const saltSweep = setInterval(() => {
    links.sweepSalts().catch((err: Error) => app.log.warn(`visitor salt sweep: ${err.message}`));
    links.rollUpVisits().catch((err: Error) => app.log.warn(`visit rollup: ${err.message}`));
  }, SALT_SWEEP_MS);
  saltSweep.unref();
  app.addHook('onClose', async () => clearInterval(saltSweep));

  // Rule 7: the API routes and the web pages first, the catch-all redirect last.
  await app.register(createLinkRoute, { links, limiter: createLimiter, baseUrl: config.BASE_URL, ipv6Prefix: config.RATE_LIMIT_IPV6_PREFIX });
  await app.register(linkStatsRoute, { links });
  await app.register(adminLinksRoutes, { repo, baseUrl: config.BASE_URL, adminKey: config.SHORTENER_ADMIN_KEY });
  await app.register(linkQrRoute, { links, baseUrl: config.BASE_URL });
  await app.register(linkVisitsRoute, { links });
  await app.register(webPagesRoutes, { links });
  await app.register(redirectRoute, { links });
  return app;
}
