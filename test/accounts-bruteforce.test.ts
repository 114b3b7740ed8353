import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import type { Redis } from 'ioredis';
import { LOGIN_FAILURE_LIMITS, emailDigest, loginFailureKeys } from '../src/accounts/login-throttle.js';
import type { PublicUser } from '../src/accounts/repository.js';
import { INVALID_CREDENTIALS } from '../src/accounts/service.js';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http.js';
import { MemoryCounterStore } from '../src/kit/rate-limit.js';
import { connectRedis } from '../src/kit/redis.js';
import { accountsPasswordHasher } from '../src/accounts/passwords.js';
import { accountsSuite, assertError, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { LogCapture } from './helpers/logs.js';
import { waitReady, withoutRedis } from './helpers/redis.js';
import { uniqueEmail } from './helpers/emails.js';
import { uniqueIp } from './helpers/client-ips.js';

const suite = accountsSuite();
const PASSWORD = 'the right password';
const WINDOW_MS = 15 * 60_000;
let victim: PublicUser;
let bystander: PublicUser;

const login = (app: App, email: string, password: string, ip?: string) =>
  json(app, 'POST', '/auth/login', { email, password }, ip ? { 'x-forwarded-for': ip } : {});

/** An address that no earlier run (sharing Redis) has counted failures for. */

function assertThrottled(res: Awaited<ReturnType<typeof login>>, seconds: number): void {
  assert.equal(res.statusCode, 429, res.body);
  assert.deepEqual(res.json(), {
    status: 429,
    response: 'Too Many Requests',
    message: `Too many failed login attempts, try again in ${seconds} seconds.`,
  });
  assert.equal(res.headers['retry-after'], String(seconds));
}

before(async () => {
  const app = await suite.app();
  [victim, bystander] = await Promise.all([
    registerUser(app, { name: 'Victim', email: uniqueEmail('victim'), password: PASSWORD }),
    registerUser(app, { name: 'Bystander', email: uniqueEmail('bystander'), password: PASSWORD }),
  ]);
});

test('the limits are 10 failures per account and 100 per IP per 15 minutes', () => {
  assert.deepEqual(LOGIN_FAILURE_LIMITS, {
    perAccount: { max: 10, windowMs: WINDOW_MS },
    perIp: { max: 100, windowMs: WINDOW_MS },
  });
});

test('10 failures lock the account (429, Retry-After, even for the right password) until the window ends', async () => {
  const clock = manualClock();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { clock });
  const ip = uniqueIp();
  const failures = await Promise.all(Array.from({ length: 10 }, () => login(app, victim.email, 'wrong password', ip)));
  for (const res of failures) assertError(res, 401, INVALID_CREDENTIALS);

  assertThrottled(await login(app, victim.email, PASSWORD, ip), 900);
  // Another address does not help: the lock is on the account.
  assertThrottled(await login(app, victim.email.toUpperCase(), PASSWORD, uniqueIp()), 900);
  // Other accounts are untouched.
  assert.equal((await login(app, bystander.email, PASSWORD, ip)).statusCode, 200);

  clock.advance(WINDOW_MS - 1000);
  assertThrottled(await login(app, victim.email, PASSWORD, ip), 1);
  clock.advance(1000);
  assert.equal((await login(app, victim.email, PASSWORD, ip)).statusCode, 200);
});

test('a success does not count and clears the account failures; the IP failures stay', async () => {
  const clock = manualClock();
  const store = new MemoryCounterStore(clock);
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { clock, loginCounterStore: store });
  const ip = uniqueIp();
  const keys = loginFailureKeys(victim.email, ip);
  const fail = async (n: number) => {
    for (let i = 0; i < n; i++) await store.hit(keys.account, WINDOW_MS);
  };

  await fail(9);
  assert.equal((await login(app, victim.email, PASSWORD, ip)).statusCode, 200);
  assert.equal(await store.peek(keys.account), undefined);
  // Without the reset these would make 18 failures: the next real one is still a 401.
  await fail(9);
  assertError(await login(app, victim.email, 'wrong password', ip), 401, INVALID_CREDENTIALS);
  assertThrottled(await login(app, victim.email, PASSWORD, ip), 900);
  assert.equal((await store.peek(keys.ip))?.count, 1, 'only the real failure counted for the IP; the success did not');
  store.close();
});

test('100 failures from one IP block every login from it, across accounts, and only from it', async () => {
  const clock = manualClock();
  const store = new MemoryCounterStore(clock);
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { clock, loginCounterStore: store });
  const ip = uniqueIp();
  // 99 earlier failures from this address (spread over many accounts).
  for (let i = 0; i < 99; i++) await store.hit(loginFailureKeys('', ip).ip, WINDOW_MS);

  assertError(await login(app, uniqueEmail('spray'), 'spray password', ip), 401, INVALID_CREDENTIALS);
  assertThrottled(await login(app, uniqueEmail('spray'), 'spray password', ip), 900);
  assertThrottled(await login(app, bystander.email, PASSWORD, ip), 900);
  assert.equal((await login(app, bystander.email, PASSWORD, uniqueIp())).statusCode, 200);
  clock.advance(WINDOW_MS);
  assert.equal((await login(app, bystander.email, PASSWORD, ip)).statusCode, 200);
  store.close();
});

test('throttling is logged with the email hash and the IP, never the email or password', async () => {
  const clock = manualClock();
  const store = new MemoryCounterStore(clock);
  const logs = new LogCapture();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1', LOG_LEVEL: 'info' }, { clock, loginCounterStore: store, logs });
  const ip = uniqueIp();
  for (let i = 0; i < 10; i++) await store.hit(loginFailureKeys(victim.email, ip).account, WINDOW_MS);
  assertThrottled(await login(app, victim.email, 'attempted password', ip), 900);
  const line = logs.lines().find((l) => l.event === 'login_throttled');
  assert.ok(line, logs.text());
  assert.equal(line.emailHash, emailDigest(victim.email));
  assert.equal(line.ip, ip);
  assert.ok(!logs.text().includes(victim.email) && !logs.text().includes('attempted password'));
  store.close();
});

test('with REDIS_URL the failure counters live in Redis and are shared by every instance', { skip: withoutRedis }, async () => {
  const redis = connectRedis(process.env.REDIS_URL!, () => {});
  const other = connectRedis(process.env.REDIS_URL!, () => {});
  try {
    // Commands are not queued while connecting (the kit fails fast), so wait for both.
    await Promise.all([waitReady(redis), waitReady(other)]);
    const first = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { redis });
    const second = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { redis: other });
    const email = uniqueEmail('redis');
    await registerUser(first, { name: 'Redis', email, password: PASSWORD });
    const ip = uniqueIp();
    const keys = loginFailureKeys(email, ip);
    const failures = await Promise.all(Array.from({ length: 10 }, () => login(first, email, 'wrong password', ip)));
    for (const res of failures) assertError(res, 401, INVALID_CREDENTIALS);

    assert.equal(await redis.get(`accounts:login-failures:${keys.account}`), '10');
    assert.equal(await redis.get(`accounts:login-failures:${keys.ip}`), '10');
    const ttl = await redis.pttl(`accounts:login-failures:${keys.account}`);
    assert.ok(ttl > WINDOW_MS - 60_000 && ttl <= WINDOW_MS, `ttl ${ttl}`);

    // The second instance never saw those failures itself.
    const res = await login(second, email, PASSWORD, uniqueIp());
    assert.equal(res.statusCode, 429, res.body);
    assert.ok(Number(res.headers['retry-after']) > 800 && Number(res.headers['retry-after']) <= 900);

    // A success (once the window is over) clears the shared counter.
    await redis.del(`accounts:login-failures:${keys.account}`);
    await redis.set(`accounts:login-failures:${keys.account}`, '5', 'PX', WINDOW_MS);
    assert.equal((await login(second, email, PASSWORD, ip)).statusCode, 200);
    assert.equal(await redis.get(`accounts:login-failures:${keys.account}`), null);
    await redis.del(`accounts:login-failures:${keys.ip}`);
  } finally {
    redis.disconnect();
    other.disconnect();
  }
});

/** Statuses of a batch of responses, counted: `{ 401: 10, 429: 140 }`. */
function statusCounts(responses: Array<{ statusCode: number }>): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const res of responses) counts[res.statusCode] = (counts[res.statusCode] ?? 0) + 1;
  return counts;
}

/** An app whose hasher the test holds, to count the bcrypt comparisons it really ran. */
async function countedApp(deps: { redis?: Redis } = {}) {
  const hasher = accountsPasswordHasher();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { passwordHasher: hasher, ...deps });
  app.addHook('onClose', () => hasher.close());
  return { app, hasher };
}

const GUESSES = 150;
const { max: ACCOUNT_MAX } = LOGIN_FAILURE_LIMITS.perAccount;

test('150 concurrent wrong guesses at one account from one IP: at most 10 bcrypt comparisons, 429 for the rest', async () => {
  const { app, hasher } = await countedApp();
  const email = uniqueEmail('parallel');
  await registerUser(app, { name: 'Parallel', email, password: PASSWORD });
  const before = hasher.started.verify;
  const ip = uniqueIp();
  const responses = await Promise.all(Array.from({ length: GUESSES }, (_, i) => login(app, email, `wrong guess ${i}`, ip)));
  assert.deepEqual(statusCounts(responses), { 401: ACCOUNT_MAX, 429: GUESSES - ACCOUNT_MAX });
  assert.equal(hasher.started.verify - before, ACCOUNT_MAX, 'bcrypt comparisons');
  for (const res of responses) if (res.statusCode === 429) assertThrottled(res, 900);
});

test('the right password hidden among 150 concurrent guesses never gets in once the limit is spent', async () => {
  const { app, hasher } = await countedApp();
  const email = uniqueEmail('hidden');
  await registerUser(app, { name: 'Hidden', email, password: PASSWORD });
  const before = hasher.started.verify;
  const ip = uniqueIp();
  const right = new Set([20, 75, GUESSES - 1]);
  const responses = await Promise.all(
    Array.from({ length: GUESSES }, (_, i) => login(app, email, right.has(i) ? PASSWORD : `wrong guess ${i}`, ip)),
  );
  assert.equal(statusCounts(responses)[200], undefined, 'a guess got in');
  for (const i of right) assert.equal(responses[i]!.statusCode, 429, responses[i]!.body);
  assert.ok(hasher.started.verify - before <= ACCOUNT_MAX, `${hasher.started.verify - before} bcrypt comparisons`);
  // Spent from another address too: the lock is on the account.
  assert.equal((await login(app, email, PASSWORD, uniqueIp())).statusCode, 429);
});

test('with REDIS_URL, 150 concurrent guesses split over two instances: at most 10 bcrypt comparisons in all', { skip: withoutRedis }, async () => {
  const redis = connectRedis(process.env.REDIS_URL!, () => {});
  const other = connectRedis(process.env.REDIS_URL!, () => {});
  try {
    await Promise.all([waitReady(redis), waitReady(other)]);
    const first = await countedApp({ redis });
    const second = await countedApp({ redis: other });
    const email = uniqueEmail('shared');
    await registerUser(first.app, { name: 'Shared', email, password: PASSWORD });
    const before = first.hasher.started.verify + second.hasher.started.verify;
    const ip = uniqueIp();
    const right = new Set([30, 31, 100, GUESSES - 1]);
    const responses = await Promise.all(
      Array.from({ length: GUESSES }, (_, i) => login(i % 2 ? first.app : second.app, email, right.has(i) ? PASSWORD : `wrong guess ${i}`, ip)),
    );
    assert.deepEqual(statusCounts(responses), { 401: ACCOUNT_MAX, 429: GUESSES - ACCOUNT_MAX });
    for (const i of right) assert.equal(responses[i]!.statusCode, 429);
    assert.equal(first.hasher.started.verify + second.hasher.started.verify - before, ACCOUNT_MAX, 'bcrypt comparisons, both instances');
    const keys = loginFailureKeys(email, ip);
    assert.equal(await redis.get(`accounts:login-failures:${keys.account}`), String(ACCOUNT_MAX), 'refused guesses are not counted');
    assert.equal(await redis.get(`accounts:login-failures:${keys.ip}`), String(ACCOUNT_MAX));
    await redis.del(`accounts:login-failures:${keys.account}`, `accounts:login-failures:${keys.ip}`);
  } finally {
    redis.disconnect();
    other.disconnect();
  }
});

test('one IP spraying many accounts at once: no more comparisons than the IP has left (90 spent, 30 at once: 10)', async () => {
  const store = new MemoryCounterStore();
  const hasher = accountsPasswordHasher();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { passwordHasher: hasher, loginCounterStore: store });
  app.addHook('onClose', async () => {
    store.close();
    await hasher.close();
  });
  const ip = uniqueIp();
  for (let i = 0; i < 90; i++) await store.hit(loginFailureKeys('', ip).ip, WINDOW_MS);
  const before = hasher.started.verify;
  const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => login(app, uniqueEmail(`spray${i}`), 'spray password', ip)));
  assert.deepEqual(statusCounts(responses), { 401: 10, 429: 20 });
  assert.equal(hasher.started.verify - before, 10);
  assert.equal((await store.peek(loginFailureKeys('', ip).ip))?.count, LOGIN_FAILURE_LIMITS.perIp.max);
});

noSecretInAnyResponse();
