import { createHmac } from 'node:crypto';
import type { Writable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { Redis } from 'ioredis';
import { type Clock, systemClock } from '../kit/clock.js';
import type { Pool } from '../kit/db.js';
import { type App, createServer } from '../kit/http.js';
import { type CounterStore, MemoryCounterStore, RedisCounterStore } from '../kit/rate-limit.js';
import { AuthRateLimits } from './auth/rate-limits.js';
import { httpSettings } from '../kit/http-limits.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import { AuthRepository } from './auth/repository.js';
import { authRoutes } from './auth/routes.js';
import { AuthService } from './auth/service.js';
import { Passwords, idpPasswordHasher } from './auth/passwords.js';
import type { IdpConfig } from './config.js';
import { type Caller, gatewayHook } from './gateway.js';
import type { SigningKeys } from './keys.js';
import { restRoutes } from './rest/routes.js';
import { SchemaCache } from './rest/schema-cache.js';
import { IDP_DOCUMENT } from './auth/schemas.js';

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
}

/** Routes that are not Supabase's own (404 catch-all, readiness) answer `{message}`, like the gateway does. */
const messageBody = (_status: number, message: string) => ({ message });

export async function buildApp(config: IdpConfig, deps: IdpDeps): Promise<App> {
  const clock = deps.clock ?? systemClock;
  const app = await createServer({
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
  });

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
    ipv6Prefix: config.RATE_LIMIT_IPV6_PREFIX,
  });

  const hasher = deps.passwordHasher ?? idpPasswordHasher({ maxQueued: config.BCRYPT_QUEUE_MAX });
  if (!deps.passwordHasher) app.addHook('onClose', () => hasher.close());
  const auth = new AuthService(
    new AuthRepository(deps.pool),
    deps.keys,
    await Passwords.create(hasher),
    clock,
    {
      autoconfirm: config.IDP_AUTOCONFIRM,
      jwtExpirySeconds: config.IDP_JWT_EXPIRY,
      refreshTokenReuseIntervalSeconds: config.IDP_REFRESH_TOKEN_REUSE_INTERVAL,
      issuer: `${config.IDP_SITE_URL}/auth/v1`,
      refreshTokenKey: createHmac('sha256', config.IDP_SECRET_KEY).update('idp refresh token rotation').digest(),
      beforeConfirmationEmail: () => limits.emailSent(),
    },
    app.log,
  );

  // Public, like Supabase's: verifying a token needs no key.
  app.get(
    '/auth/v1/.well-known/jwks.json',
    {
      schema: {
        tags: ['auth'],
        summary: 'Public keys that verify access tokens',
        response: { 200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }) },
      },
    },
    async (_request, reply) => reply.header('cache-control', 'public, max-age=600').send(deps.keys.jwks()),
  );

  await app.register(async (api) => {
    api.decorateRequest('caller', null as unknown as Caller);
    api.addHook('onRequest', gatewayHook({ publishable: config.IDP_PUBLISHABLE_KEY, secret: config.IDP_SECRET_KEY }));
    await api.register(authRoutes, { prefix: '/auth/v1', auth, limits });
    await api.register(restRoutes, { prefix: '/rest/v1', pool: deps.restPool, schema: new SchemaCache(deps.pool), keys: deps.keys });
  });

  return app;
}
