import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { type Clock, systemClock } from '../kit/clock.js';
import type { Pool } from '../kit/db.js';
import { type App, buildHttpApp } from '../kit/http.js';
import { statusEnvelope } from '../kit/status-envelope.js';
import { type HttpVariable, httpSettings } from '../kit/http-limits.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import { type CounterStore, FixedWindowLimiter, MemoryCounterStore, RedisCounterStore } from '../kit/rate-limit.js';
import { createMailTransport } from '../kit/mail/transport.js';
import { type MailWorker, type MailWorkerOptions, startMailWorker } from '../kit/mail/worker.js';
import { AuditLog } from './audit.js';
import type { AccessCheck } from './auth.js';
import type { AccountsConfig } from './config.js';
import { EmailFlows, type MailSender } from './email-flows.js';
import { EmailTokens } from './email-tokens.js';
import { LoginThrottle } from './login-throttle.js';
import { installAccountsMetrics } from './metrics.js';
import { accountsPasswordHasher, dummyPasswordHash } from './passwords.js';
import { UsersRepository } from './repository.js';
import { adminAuditRoute } from './routes/admin-audit.js';
import { adminUserChangesRoutes } from './routes/admin-user-changes.js';
import { adminUsersRoute } from './routes/admin-users.js';
import { jwksRoute } from './routes/jwks.js';
import { loginRoute } from './routes/login.js';
import { meRoute } from './routes/me.js';
import { passwordRoute } from './routes/password.js';
import { passwordResetRoutes } from './routes/password-reset.js';
import { verifyEmailRoutes } from './routes/verify-email.js';
import { refreshRoute } from './routes/refresh.js';
import { registerRoute } from './routes/register.js';
import { ACCOUNTS_DOCUMENT } from './routes/schemas.js';
import { sessionsRoutes } from './routes/sessions.js';
import { webPagesRoutes } from './routes/web-pages.js';
import { AccountsService } from './service.js';
import { startPruning } from './pruning.js';
import { RefreshTokens, Sessions } from './sessions.js';
import { Es256Keys } from './signing-keys.js';
import { AccessTokens } from './tokens.js';
import { UserAdministration } from './user-admin.js';

export interface AccountsDeps {
  pool: Pool;
  /** Login-failure counters shared by N instances; without it they live in this process. */
  redis?: Redis;
  /** Overrides where login-failure counters live (tests pre-fill one). */
  loginCounterStore?: CounterStore;
  /** Overrides the password hasher (tests count its jobs); the caller then closes it. */
  passwordHasher?: PasswordHasher;
  clock?: Clock;
  logStream?: Writable;
  /** Overrides the mail worker's timing (tests shorten its retries). */
  mailWorker?: Partial<Pick<MailWorkerOptions, 'pollIntervalMs' | 'retryBaseMs' | 'retryMaxMs' | 'maxAttempts'>>;
}

export type AccountsAppConfig = Pick<
  AccountsConfig,
  | 'JWT_SECRET'
  | 'JWT_ALGORITHM'
  | 'JWT_PRIVATE_KEY'
  | 'JWT_PREVIOUS_PUBLIC_KEYS'
  | 'DATA_DIR'
  | 'JWT_EXPIRES_IN'
  | 'LOG_LEVEL'
  | 'TRUST_PROXY'
  | 'METRICS_TOKEN'
  | 'RATE_LIMIT_IPV6_PREFIX'
  | 'REGISTER_MAX_PER_IP'
  | 'REGISTER_WINDOW'
  | 'BCRYPT_QUEUE_MAX'
  | 'SESSION_IDLE_TIMEOUT'
  | 'SESSION_MAX_LIFETIME'
  | 'REFRESH_REUSE_INTERVAL'
  | 'PRUNE_INTERVAL'
  | 'OPENAPI_RESPONSE_CHECK'
  | 'SMTP_URL'
  | 'MAIL_FROM'
  | 'ACCOUNTS_PUBLIC_URL'
  | 'REQUIRE_EMAIL_VERIFICATION'
  | 'MAIL_REQUESTS_MAX_PER_IP'
  | 'MAIL_REQUESTS_WINDOW'
  | HttpVariable
>;

export async function buildApp(config: AccountsAppConfig, deps: AccountsDeps): Promise<App> {
  const clock = deps.clock ?? systemClock;
  if (config.REQUIRE_EMAIL_VERIFICATION && !config.SMTP_URL) {
    throw new Error('REQUIRE_EMAIL_VERIFICATION is on but SMTP_URL is not set: verification mails could not be sent');
  }
  const app = await buildHttpApp({
    title: 'Accounts',
    description: 'Registration, login with a signed access token (HS256, or ES256 with a published JWKS), profile, admin listing.',
    document: ACCOUNTS_DOCUMENT,
    logLevel: config.LOG_LEVEL,
    logStream: deps.logStream,
    trustProxy: config.TRUST_PROXY,
    errorBody: statusEnvelope,
    http: httpSettings(config),
    responseCheck: config.OPENAPI_RESPONSE_CHECK,
    readiness: async () => {
      await deps.pool.query('SELECT 1');
    },
    metrics: { token: config.METRICS_TOKEN, pools: { main: deps.pool } },
  });

  const passwords = deps.passwordHasher ?? accountsPasswordHasher({ maxQueued: config.BCRYPT_QUEUE_MAX });
  if (!deps.passwordHasher) app.addHook('onClose', () => passwords.close());
  installAccountsMetrics(app, passwords);
  // Made before the first request, so the first unknown-email login is not
  // slower than a wrong password (the hash is made once per process).
  await dummyPasswordHash(passwords);

  const memory = new MemoryCounterStore(clock);
  app.addHook('onClose', async () => memory.close());
  const counters =
    deps.loginCounterStore ??
    (deps.redis ? new RedisCounterStore(deps.redis, 'accounts:login-failures:', memory, clock, (m) => app.log.warn(m)) : memory);
  const registrationMemory = new MemoryCounterStore(clock);
  app.addHook('onClose', async () => registrationMemory.close());
  const registrationCounters = deps.redis
    ? new RedisCounterStore(deps.redis, 'accounts:registrations:', registrationMemory, clock, (m) => app.log.warn(m))
    : registrationMemory;
  const registrations = new FixedWindowLimiter(config.REGISTER_MAX_PER_IP, config.REGISTER_WINDOW * 1000, registrationCounters, clock);

  const mailRequestMemory = new MemoryCounterStore(clock);
  const mailAddressMemory = new MemoryCounterStore(clock);
  app.addHook('onClose', async () => {
    mailRequestMemory.close();
    mailAddressMemory.close();
  });
  const mailLimits = {
    perIp: new FixedWindowLimiter(
      config.MAIL_REQUESTS_MAX_PER_IP,
      config.MAIL_REQUESTS_WINDOW * 1000,
      deps.redis ? new RedisCounterStore(deps.redis, 'accounts:mail-requests:', mailRequestMemory, clock, (m) => app.log.warn(m)) : mailRequestMemory,
      clock,
    ),
    perAddress: new FixedWindowLimiter(
      1,
      60_000,
      deps.redis ? new RedisCounterStore(deps.redis, 'accounts:mail-addresses:', mailAddressMemory, clock, (m) => app.log.warn(m)) : mailAddressMemory,
      clock,
    ),
  };

  // The worker starts once the app is built (below), so a build that fails leaves none running.
  let worker: MailWorker | undefined;
  const mailer: MailSender | undefined = config.SMTP_URL ? { wake: () => worker?.wake() } : undefined;
  if (!config.SMTP_URL) {
    app.log.warn({ event: 'mail_not_configured' }, 'SMTP_URL is not set: password reset and email verification answer 503');
  }

  let es256: Es256Keys | undefined;
  if (config.JWT_ALGORITHM === 'ES256') {
    es256 = await Es256Keys.load(config.JWT_PRIVATE_KEY, config.JWT_PREVIOUS_PUBLIC_KEYS ?? [], config.DATA_DIR);
    app.log.info({ kid: es256.kid, configured: config.JWT_PRIVATE_KEY !== undefined, previousKeys: es256.jwks().keys.length - 1 }, 'access tokens signed with ES256');
  }
  const tokens = new AccessTokens(es256 ? { algorithm: 'ES256', keys: es256 } : { algorithm: 'HS256', secret: config.JWT_SECRET }, config.JWT_EXPIRES_IN, clock);
  const users = new UsersRepository(deps.pool);
  const audit = new AuditLog(deps.pool, clock);
  const sessions = new Sessions(
    deps.pool,
    users,
    audit,
    tokens,
    new RefreshTokens(config.JWT_SECRET),
    {
      idleMs: config.SESSION_IDLE_TIMEOUT * 1000,
      maxLifetimeMs: config.SESSION_MAX_LIFETIME * 1000,
      reuseIntervalMs: config.REFRESH_REUSE_INTERVAL * 1000,
    },
    clock,
  );
  const emails = new EmailFlows(
    deps.pool,
    users,
    new EmailTokens(deps.pool),
    sessions,
    audit,
    passwords,
    mailLimits,
    config.RATE_LIMIT_IPV6_PREFIX,
    config.ACCOUNTS_PUBLIC_URL,
    mailer,
    clock,
  );
  const accounts = new AccountsService(
    deps.pool,
    users,
    sessions,
    audit,
    new LoginThrottle(counters, clock),
    passwords,
    registrations,
    config.RATE_LIMIT_IPV6_PREFIX,
    clock,
    emails,
    config.REQUIRE_EMAIL_VERIFICATION,
  );
  // What every protected route's requireAccessToken checks a token against.
  const access: AccessCheck = { tokens, users, audit };

  // The route map. Public:
  await app.register(registerRoute, { accounts });
  await app.register(loginRoute, { accounts });
  await app.register(refreshRoute, { sessions });
  await app.register(jwksRoute, { keys: es256 });
  await app.register(passwordResetRoutes, { emails });
  await app.register(verifyEmailRoutes, { emails });
  // A valid token; a deleted user's is 404 on /auth/me (docs/accounts.md, rule 5):
  await app.register(meRoute, { access });
  await app.register(sessionsRoutes, { sessions, access });
  await app.register(passwordRoute, { accounts, access });
  // A valid token, then role admin (docs/accounts.md, rule 6):
  await app.register(adminUsersRoute, { accounts, access });
  await app.register(adminUserChangesRoutes, { admin: new UserAdministration(deps.pool, users, sessions, audit, clock), access });
  await app.register(adminAuditRoute, { audit, access });
  // The web pages over this API (src/accounts/web/):
  await app.register(webPagesRoutes);

  if (config.SMTP_URL) {
    const started = startMailWorker({
      pool: deps.pool,
      transport: createMailTransport(config.SMTP_URL),
      from: config.MAIL_FROM,
      log: app.log,
      ...deps.mailWorker,
    });
    worker = started;
    // After the server stopped taking requests: what they queued is sent before the pool closes.
    app.addHook('onClose', () => started.stop());
  }
  if (config.PRUNE_INTERVAL > 0) {
    const pruning = startPruning({
      pool: deps.pool,
      clock,
      intervalMs: config.PRUNE_INTERVAL * 1000,
      idleMs: config.SESSION_IDLE_TIMEOUT * 1000,
      maxLifetimeMs: config.SESSION_MAX_LIFETIME * 1000,
      log: app.log,
    });
    // Before the pool closes: a run in progress finishes its statement first.
    app.addHook('onClose', () => pruning.stop());
  }
  return app;
}
