import { Counter, Gauge, Histogram } from 'prom-client';
import type { App } from '../kit/http/app.js';
import { metricsRegistry } from '../kit/http/metrics.js';

// The accounts service's own figures. Login outcomes are read from the answer
// of the login route (401: a failure, 429: refused by the throttle), so the
// route carries no metrics code; the email and address of an attempt are never
// labels.

const LOGIN_ROUTE = '/auth/login';
/** A password change checks the current password against the same limiter. */
const PASSWORD_ROUTE = '/auth/password';

/** What the gauges read from the password hasher when scraped. */
export interface HasherState {
  readonly queued: Readonly<Record<'verify' | 'hash', number>>;
  readonly running: number;
  readonly refused: Readonly<Record<'verify' | 'hash', number>>;
  observeWait: (seconds: number) => void;
}

export function installAccountsMetrics(app: App, hasher: HasherState): void {
  const loginFailures = new Counter({
    name: 'accounts_login_failures_total',
    help: 'Logins refused for a wrong password or an unknown email (401).',
    registers: [metricsRegistry(app)],
  });
  const rateLimited = new Counter({
    name: 'rate_limited_requests_total',
    help: 'Requests refused with 429, by limiter (login_throttle: too many failed logins for the account or the address).',
    labelNames: ['limiter'] as const,
    registers: [metricsRegistry(app)],
  });
  rateLimited.inc({ limiter: 'login_throttle' }, 0);

  new Gauge({
    name: 'accounts_bcrypt_jobs',
    help: 'Password hashing jobs, by state: queued (waiting for a worker; logins and registrations together) or running.',
    labelNames: ['state'] as const,
    registers: [metricsRegistry(app)],
    collect() {
      const { verify, hash } = hasher.queued;
      this.set({ state: 'queued' }, verify + hash);
      this.set({ state: 'running' }, hasher.running);
    },
  });
  new Counter({
    name: 'accounts_bcrypt_refused_total',
    help: 'Password hashing jobs refused with 503 because their queue was full, by kind (verify: login, hash: registration).',
    labelNames: ['kind'] as const,
    registers: [metricsRegistry(app)],
    collect() {
      this.reset();
      this.inc({ kind: 'verify' }, hasher.refused.verify);
      this.inc({ kind: 'hash' }, hasher.refused.hash);
    },
  });
  const wait = new Histogram({
    name: 'accounts_bcrypt_wait_seconds',
    help: 'Time a password hashing job waited for a worker before it started.',
    buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [metricsRegistry(app)],
  });
  hasher.observeWait = (seconds) => wait.observe(seconds);

  // Synchronous (done): an async hook would cost every request a promise.
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url;
    if (route === LOGIN_ROUTE && reply.statusCode === 401) loginFailures.inc();
    else if ((route === LOGIN_ROUTE || route === PASSWORD_ROUTE) && reply.statusCode === 429)
      rateLimited.inc({ limiter: 'login_throttle' });
    done();
  });
}
