import { createHmac } from 'node:crypto';
import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { type Clock, systemClock } from '../kit/clock.js';
import type { Pool } from '../kit/db.js';
import { type App, buildHttpApp } from '../kit/http.js';
import { type CounterStore, MemoryCounterStore, RedisCounterStore } from '../kit/rate-limit.js';
import { AuthRateLimits } from './auth/rate-limits.js';
import { httpSettings } from '../kit/http-limits.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import { AuthRepository } from './auth/repository.js';
import { authRoutes, jwksRoute } from './auth/routes.js';
import { AuthService } from './auth/service.js';
import { AdminUsers } from './auth/admin-users.js';
import { UserUpdates } from './auth/user-update.js';
import { Passwords, idpPasswordHasher } from './auth/passwords.js';
import type { IdpConfig } from './config.js';
import { installCors } from './cors.js';
import type { SigningKeys } from './keys.js';
import { restRoutes } from './rest/routes.js';
import { SchemaCache } from './rest/schema-cache.js';
import { IDP_DOCUMENT } from './auth/schemas.js';
import { EmailFlows } from './auth/email-flows.js';
import type { MailQueue } from './auth/mails.js';
import { RedirectPolicy } from './auth/redirects.js';

export interface IdpDeps {
  /** Admin connection: owns the auth schema and reads the catalog. */
  pool: Pool;
  /** Authenticator connection: every REST request, switched into an API role. */
  restPool: Pool;
  keys: SigningKeys;
  /** Overrides the password hasher (tests count its jobs); the caller then closes it. */
  passwordHasher?: PasswordHasher;
  clock?: Clock;
  logStream?: Writable;
  /** Shares the rate-limit counters between instances; absent: counted in this process. */
  redis?: Redis;
  /** Queues the idp's mails (SMTP_URL set); absent: mails are dropped, as GoTrue without SMTP. */
  mailQueue?: MailQueue;
}

/** Routes that are not Supabase's own (404 catch-all, readiness) answer `{message}`, like the gateway does. */
const messageBody = (_status: number, message: string) => ({ message });

export async function buildApp(config: IdpConfig, deps: IdpDeps): Promise<App> {
  const clock = deps.clock ?? systemClock;
  const app = await buildHttpApp({
    title: 'idp',
    description: 'A local identity provider speaking the Supabase Auth (/auth/v1) and PostgREST (/rest/v1) subset used by supabase-js',
    logLevel: config.LOG_LEVEL,
    logStream: deps.logStream,
    trustProxy: config.TRUST_PROXY,
    errorBody: messageBody,
    document: IDP_DOCUMENT,
    readiness: async () => {
      await deps.pool.query('SELECT 1');
      await deps.restPool.query('SELECT 1');
    },
    bodyLimit: 1024 * 1024,
    metrics: { token: config.METRICS_TOKEN, pools: { auth: deps.pool, rest: deps.restPool } },
    http: httpSettings(config),
    responseCheck: config.OPENAPI_RESPONSE_CHECK,
  });

  installCors(app, config.IDP_CORS_ORIGINS);

  const counterStores: MemoryCounterStore[] = [];
  app.addHook('onClose', async () => counterStores.forEach((store) => store.close()));
  const storeFor = (limit: string): CounterStore => {
    const memory = new MemoryCounterStore(clock);
    counterStores.push(memory);
    return deps.redis ? new RedisCounterStore(deps.redis, `idp:rate-limit:${limit}:`, memory, clock, (m) => app.log.warn(m)) : memory;
  };
  const limits = new AuthRateLimits(storeFor, clock, {
    tokenRequests: config.IDP_RATE_LIMIT_TOKEN_REFRESH,
    signups: config.IDP_RATE_LIMIT_OTP,
    emailsSent: config.IDP_RATE_LIMIT_EMAIL_SENT,
    loginFailures: config.IDP_RATE_LIMIT_LOGIN_FAILURES,
    verifications: config.IDP_RATE_LIMIT_VERIFY,
    emailFrequencySeconds: config.IDP_SMTP_MAX_FREQUENCY,
    ipv6Prefix: config.RATE_LIMIT_IPV6_PREFIX,
  });

  const hasher = deps.passwordHasher ?? idpPasswordHasher({ maxQueued: config.BCRYPT_QUEUE_MAX });
  if (!deps.passwordHasher) app.addHook('onClose', () => hasher.close());
  const authRepository = new AuthRepository(deps.pool);
  const passwords = await Passwords.create(hasher);
  const auth = new AuthService(
    authRepository,
    deps.keys,
    passwords,
    clock,
    {
      autoconfirm: config.IDP_AUTOCONFIRM,
      jwtExpirySeconds: config.IDP_JWT_EXPIRY,
      refreshTokenReuseIntervalSeconds: config.IDP_REFRESH_TOKEN_REUSE_INTERVAL,
      issuer: `${config.IDP_SITE_URL}/auth/v1`,
      refreshTokenKey: createHmac('sha256', config.IDP_SECRET_KEY).update('idp refresh token rotation').digest(),
    },
    app.log,
  );
  if (!deps.mailQueue) app.log.warn('SMTP_URL is not set: the idp sends no mail (confirmation, recovery, magic links are dropped); admin generate_link still returns links');
  const emailFlows = new EmailFlows(authRepository, auth, passwords, limits, clock, {
    otpExpirySeconds: config.IDP_MAILER_OTP_EXP,
    apiUrl: `${config.IDP_SITE_URL}/auth/v1`,
    redirects: new RedirectPolicy(config.IDP_APP_URL, config.IDP_REDIRECT_URLS),
    mailQueue: deps.mailQueue,
    log: app.log,
  });
  app.addHook('onClose', () => emailFlows.drain());
  auth.useConfirmationMail({
    before: (email) => emailFlows.beforeConfirmationMail(email),
    send: (client, user, redirectTo) => emailFlows.confirmationMail(client, user, redirectTo),
    committed: () => emailFlows.confirmationCommitted(),
  });

  // Public, like Supabase's: verifying a token needs no key; outside the gateway.
  await app.register(jwksRoute, { keys: deps.keys });
  const gateway = { publishable: config.IDP_PUBLISHABLE_KEY, secret: config.IDP_SECRET_KEY };
  const users = {
    admin: new AdminUsers(auth, authRepository, passwords, clock),
    self: new UserUpdates(auth, authRepository, passwords, clock, { autoconfirm: config.IDP_AUTOCONFIRM, flows: emailFlows }),
  };
  await app.register(authRoutes, { prefix: '/auth/v1', gateway, auth, limits, users, emailFlows });
  await app.register(restRoutes, { prefix: '/rest/v1', gateway, pool: deps.restPool, schema: new SchemaCache(deps.pool), keys: deps.keys });

  return app;
}
