import { fileURLToPath } from 'node:url';
import { statusEnvelope } from '../kit/http/status-envelope.js';
import { defineService } from '../kit/service.js';
import { type CodeGenerator, randomCode } from './codes.js';
import { shortenerConfig } from './config.js';
import { LinkService } from './links.js';
import { installShortenerMetrics } from './metrics.js';
import { LinkRepository } from './repository.js';
import { Access } from './access.js';
import { LinkPasswords, linkPasswordHasher } from './link-passwords.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import { adminLinksRoutes } from './routes/admin-links.js';
import { apiKeysRoutes } from './routes/api-keys.js';
import { bulkLinksRoute } from './routes/bulk-links.js';
import { createLinkRoute } from './routes/create-link.js';
import { exportLinksRoutes } from './routes/export-links.js';
import { linkQrRoute } from './routes/link-qr.js';
import { linkStatsRoute } from './routes/link-stats.js';
import { linkVisitsRoute } from './routes/link-visits.js';
import { redirectRoute } from './routes/redirect.js';
import { SHORTENER_DOCUMENT } from './routes/schemas.js';
import { webPagesRoutes } from './routes/web-pages.js';
import { isReservedCode } from './reserved-codes.js';

export const CREATE_LIMIT = { max: 10, windowMs: 60_000 };
export const KEY_QUOTA_WINDOW_MS = 60 * 60_000;
/** How often past days' visitor salts are deleted (a visit on a new day deletes them too) and past days' visits rolled up. */
const SALT_SWEEP_MS = 10 * 60_000;

/** What tests may hand the shortener. */
export interface ShortenerDeps {
  generateCode: CodeGenerator;
  /** Hashes and checks link passwords (tests hand a cheaper one, or count its work). */
  passwordHasher: PasswordHasher;
}

export const shortener = defineService<typeof shortenerConfig, ShortenerDeps>({
  name: 'shortener',
  config: shortenerConfig,
  migrations: () => [{ scope: 'shortener', dir: fileURLToPath(new URL('./migrations', import.meta.url)) }],
  async build({ config, pool, clock, deps, httpApp, limiter, counters, every, onClose }) {
    const app = await httpApp({
      title: 'Link shortener',
      description: 'Short codes, counted 302 redirects, stats, per-IP rate limit on create.',
      // Nothing the service keeps or prints can tell who visited a link (docs/shortener.md, Visit analytics).
      logClientAddresses: false,
      errorBody: statusEnvelope,
      document: SHORTENER_DOCUMENT,
    });
    const createLimiter = limiter('create', CREATE_LIMIT.max, CREATE_LIMIT.windowMs);
    // Links per API key per hour, single and bulk creates together.
    const keyQuota = limiter('key-create', config.KEY_CREATE_PER_HOUR, KEY_QUOTA_WINDOW_MS);

    const { observeClickBatch } = installShortenerMetrics(app);
    // Every GET route of the service (healthz, metrics) is a code never issued,
    // nor one that starts like a page the service serves (reserved-codes.ts).
    const repo = new LinkRepository(pool);
    const links = new LinkService(
      repo,
      deps.generateCode ?? randomCode,
      (code) => isReservedCode(code) || app.hasRoute({ method: 'GET', url: `/${code}` }),
      clock,
      observeClickBatch,
    );
    // A day's visitor salt must go once the day is over, even when no visit comes to replace it;
    // and the days that are over are rolled up for the visits report.
    every('visitor salt sweep', SALT_SWEEP_MS, () => links.sweepSalts());
    every('visit rollup', SALT_SWEEP_MS, () => links.rollUpVisits());

    // Rule 7: the API routes and the web pages first, the catch-all redirect last.
    const access = new Access(repo, config.SHORTENER_ADMIN_KEY);
    const ipv6 = { prefix: config.RATE_LIMIT_IPV6_PREFIX, widePrefix: config.RATE_LIMIT_IPV6_WIDE_PREFIX };
    const hasher = deps.passwordHasher ?? linkPasswordHasher({ maxQueued: config.BCRYPT_QUEUE_MAX });
    if (!deps.passwordHasher) onClose(() => hasher.close());
    // Guesses at link passwords: counted in Redis when it is configured, so the limits hold across instances.
    const passwords = new LinkPasswords(hasher, counters('link-password-guesses'), clock, ipv6);
    const createOptions = {
      passwords,
      access,
      links,
      limiter: createLimiter,
      keyQuota,
      baseUrl: config.BASE_URL,
      ipv6,
    };
    await app.register(createLinkRoute, createOptions);
    await app.register(bulkLinksRoute, createOptions);
    // A fixed path beside /api/links/:code; the router prefers it, and `export` is a reserved code.
    await app.register(exportLinksRoutes, { repo, baseUrl: config.BASE_URL, access });
    await app.register(linkStatsRoute, { links });
    await app.register(adminLinksRoutes, { repo, baseUrl: config.BASE_URL, access, passwords });
    await app.register(apiKeysRoutes, { repo, adminKey: config.SHORTENER_ADMIN_KEY });
    await app.register(linkQrRoute, { links, baseUrl: config.BASE_URL });
    await app.register(linkVisitsRoute, { links, repo, access });
    await app.register(webPagesRoutes, { links });
    await app.register(redirectRoute, { links, passwords, baseUrl: config.BASE_URL });
    return app;
  },
});
