import type { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import { type Clock, systemClock } from '../kit/clock.js';
import type { Pool } from '../kit/db.js';
import { type App, createServer, statusEnvelope } from '../kit/http.js';
import { type HttpVariable, httpSettings } from '../kit/http-limits.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import { type CounterStore, FixedWindowLimiter, MemoryCounterStore, RedisCounterStore } from '../kit/rate-limit.js';
import { authenticated } from './auth.js';
import type { AccountsConfig } from './config.js';
import { LoginThrottle } from './login-throttle.js';
import { installAccountsMetrics } from './metrics.js';
import { accountsPasswordHasher, dummyPasswordHash } from './passwords.js';
import { UsersRepository } from './repository.js';
import { adminUsersRoute } from './routes/admin-users.js';
import { loginRoute } from './routes/login.js';
import { meRoute } from './routes/me.js';
import { registerRoute } from './routes/register.js';
import { ACCOUNTS_DOCUMENT } from './routes/schemas.js';
import { AccountsService } from './service.js';
import { AccessTokens } from './tokens.js';

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
}

export type AccountsAppConfig = Pick<
  AccountsConfig,
  | 'JWT_SECRET'
  | 'JWT_EXPIRES_IN'
  | 'LOG_LEVEL'
  | 'TRUST_PROXY'
  | 'METRICS_TOKEN'
  | 'RATE_LIMIT_IPV6_PREFIX'
  | 'REGISTER_MAX_PER_IP'
  | 'REGISTER_WINDOW'
  | 'BCRYPT_QUEUE_MAX'
  | HttpVariable
>;

export async function buildApp(config: AccountsAppConfig, deps: AccountsDeps): Promise<App> {
  const clock = deps.clock ?? systemClock;
  const app = await createServer({
    title: 'Accounts',
    description: 'Registration, login with a signed HS256 access token, profile, admin listing.',
    document: ACCOUNTS_DOCUMENT,
    logLevel: config.LOG_LEVEL,
    logStream: deps.logStream,
    trustProxy: config.TRUST_PROXY,
    errorBody: statusEnvelope,
    http: httpSettings(config),
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

  const tokens = new AccessTokens(config.JWT_SECRET, config.JWT_EXPIRES_IN, clock);
  const accounts = new AccountsService(
    new UsersRepository(deps.pool),
    tokens,
    new LoginThrottle(counters, clock),
    passwords,
    registrations,
    config.RATE_LIMIT_IPV6_PREFIX,
  );

  // The route map. Public:
  registerRoute(app, accounts);
  loginRoute(app, accounts);
  // A valid token (docs/accounts.md, rule 5):
  authenticated(app, { tokens }, (scope) => meRoute(scope, accounts));
  // A valid token, then role admin (docs/accounts.md, rule 6):
  authenticated(app, { tokens, role: 'admin' }, (scope) => adminUsersRoute(scope, accounts));
  return app;
}
