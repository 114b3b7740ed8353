import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { before, test } from 'node:test';
import type { Redis } from 'ioredis';
import { LOGIN_FAILURE_LIMITS, emailDigester } from '../src/accounts/login-throttle.js';
import type { PublicUser } from '../src/accounts/repository.js';
import { INVALID_CREDENTIALS } from '../src/accounts/service.js';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { MemoryCounterStore } from '../src/kit/rate-limit.js';
import { connectRedis } from '../src/kit/redis.js';
import { accountsPasswordHasher } from '../src/accounts/passwords.js';
import { PasswordHasher } from '../src/kit/password-hasher.js';
import { TEST_BCRYPT_COST } from './helpers/passwords.js';
import {
  TEST_SECRET,
  accountsLoginKeys,
  accountsSuite,
  assertError,
  json,
  noSecretInAnyResponse,
  registerUser,
} from './helpers/accounts.js';
import { LogCapture } from './helpers/logs.js';
import { waitReady, withoutRedis } from './helpers/redis.js';
import { uniqueEmail } from './helpers/emails.js';
import { uniqueIp } from './helpers/client-ips.js';

const suite = accountsSuite();
const PASSWORD = 'the right password';
const WINDOW_MS = 15 * 60_000;
const PAIR_MAX = LOGIN_FAILURE_LIMITS.perAccountAndAddress;
let victim: PublicUser;
let bystander: PublicUser;

const login = (app: App, email: string, password: string, ip?: string) =>
  json(app, 'POST', '/auth/login', { email, password }, ip ? { 'x-forwarded-for': ip } : {});

function assertThrottled(res: Awaited<ReturnType<typeof login>>, seconds: number): void {
  assert.equal(res.statusCode, 429, res.body);
  assert.deepEqual(res.json(), {
    status: 429,
    response: 'Too Many Requests',
    message: `Too many failed login attempts, try again in ${seconds} seconds.`,
  });
  assert.equal(res.headers['retry-after'], String(seconds));
}

/** Statuses of a batch of responses, counted: `{ 401: 10, 429: 140 }`. */
function statusCounts(responses: Array<{ statusCode: number }>): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const res of responses) counts[res.statusCode] = (counts[res.statusCode] ?? 0) + 1;
  return counts;
}

/** An app whose hasher the test holds, to count the bcrypt comparisons it really ran. */
async function countedApp(deps: { redis?: Redis; store?: MemoryCounterStore; cheap?: boolean } = {}) {
  // Cheap: the tests' cost-4 hasher with a long queue, where more guesses reach bcrypt than the production queue holds.
  const hasher = deps.cheap ? new PasswordHasher({ cost: TEST_BCRYPT_COST, maxQueued: 1000 }) : accountsPasswordHasher();
  const app = await suite.app(
    { TRUST_PROXY: '127.0.0.1' },
    { redis: deps.redis, deps: { passwordHasher: hasher, ...(deps.store ? { loginCounterStore: deps.store } : {}) } },
  );
  app.addHook('onClose', () => hasher.close());
  return { app, hasher };
}

before(async () => {
  const app = await suite.app();
  [victim, bystander] = await Promise.all([
    registerUser(app, { name: 'Victim', email: uniqueEmail('victim'), password: PASSWORD }),
    registerUser(app, { name: 'Bystander', email: uniqueEmail('bystander'), password: PASSWORD }),
  ]);
});

test('the limits: 10 failures per (account, address), 1,000 per account, 100 failing accounts per address, per 15 minutes', () => {
  assert.deepEqual(LOGIN_FAILURE_LIMITS, { perAccountAndAddress: 10, perAccount: 1000, accountsPerAddress: 100, windowMs: WINDOW_MS });
});

test('owner lockout: an attacker guessing from 10 addresses never locks the owner out, and gets 10 guesses per address', async () => {
  const { app, hasher } = await countedApp({ cheap: true });
  const email = uniqueEmail('owner');
  await registerUser(app, { name: 'Owner', email, password: PASSWORD });
  const attackers = Array.from({ length: 10 }, () => uniqueIp());
  const before = hasher.started.verify;
  // 30 guesses from each address, all at once: 300 guesses.
  const guesses = await Promise.all(
    attackers.flatMap((ip) => Array.from({ length: 30 }, (_, i) => login(app, email, `wrong guess ${i}`, ip))),
  );
  assert.deepEqual(statusCounts(guesses), { 401: 10 * PAIR_MAX, 429: 300 - 10 * PAIR_MAX });
  assert.equal(hasher.started.verify - before, 10 * PAIR_MAX, 'bcrypt comparisons');
  // Even the right password from an attacking address is refused: it has spent its guesses.
  assertError(await login(app, email, PASSWORD, attackers[0]), 429, /^Too many failed login attempts/);
  // The owner, from an address that has not failed, gets in.
  assert.equal((await login(app, email, PASSWORD, uniqueIp())).statusCode, 200);
  assert.equal((await login(app, email.toUpperCase(), PASSWORD, uniqueIp())).statusCode, 200);
});

test('NAT lockout: 100 failures from one address on one account do not lock the other users of that address out', async () => {
  const clock = manualClock();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { clock });
  const office = uniqueIp();
  const answers = [];
  for (let i = 0; i < 100; i++) answers.push((await login(app, victim.email, `wrong guess ${i}`, office)).statusCode);
  assert.deepEqual(statusCounts(answers.map((statusCode) => ({ statusCode }))), { 401: PAIR_MAX, 429: 100 - PAIR_MAX });
  // Every other user behind that address still gets in, and may mistype as usual.
  assertError(await login(app, bystander.email, 'a typo in it', office), 401, INVALID_CREDENTIALS);
  assert.equal((await login(app, bystander.email, PASSWORD, office)).statusCode, 200);
  // The guessed account itself: refused from that address only, until the window ends.
  assertThrottled(await login(app, victim.email, PASSWORD, office), 900);
  assert.equal((await login(app, victim.email, PASSWORD, uniqueIp())).statusCode, 200);
  clock.advance(WINDOW_MS);
  assert.equal((await login(app, victim.email, PASSWORD, office)).statusCode, 200);
});

test(`200 concurrent wrong guesses at one account from one address: at most ${PAIR_MAX} bcrypt comparisons, 429 for the rest`, async () => {
  const { app, hasher } = await countedApp();
  const email = uniqueEmail('parallel');
  await registerUser(app, { name: 'Parallel', email, password: PASSWORD });
  const before = hasher.started.verify;
  const ip = uniqueIp();
  const right = new Set([20, 75, 199]);
  const responses = await Promise.all(
    Array.from({ length: 200 }, (_, i) => login(app, email, right.has(i) ? PASSWORD : `wrong guess ${i}`, ip)),
  );
  assert.equal(statusCounts(responses)[200], undefined, 'a hidden right guess got in once the limit was spent');
  assert.ok((statusCounts(responses)[401] ?? 0) <= PAIR_MAX);
  assert.ok(hasher.started.verify - before <= PAIR_MAX, `${hasher.started.verify - before} bcrypt comparisons`);
  for (const res of responses) if (res.statusCode === 429) assertThrottled(res, 900);
});

test('a guess spread over many addresses stops at the per-account ceiling, from every address but those the owner signed in from', async () => {
  const clock = manualClock();
  const store = new MemoryCounterStore(clock);
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { clock, deps: { loginCounterStore: store } });
  const keys = accountsLoginKeys(victim.email, uniqueIp());
  // The owner signed in from home before the attack.
  const home = uniqueIp();
  assert.equal((await login(app, victim.email, PASSWORD, home)).statusCode, 200);
  await store.hit(keys.account, WINDOW_MS, LOGIN_FAILURE_LIMITS.perAccount - 1);
  assertError(await login(app, victim.email, 'wrong guess', uniqueIp()), 401, INVALID_CREDENTIALS);
  assertThrottled(await login(app, victim.email, PASSWORD, uniqueIp()), 900);
  // From home the owner still gets in: a known address is not held to the ceiling (its own limit of 10 still holds).
  assertError(await login(app, victim.email, 'a typo at home', home), 401, INVALID_CREDENTIALS);
  assert.equal((await login(app, victim.email, PASSWORD, home)).statusCode, 200);
  // Other accounts are untouched.
  assert.equal((await login(app, bystander.email, PASSWORD, uniqueIp())).statusCode, 200);
  clock.advance(WINDOW_MS);
  assert.equal((await login(app, victim.email, PASSWORD, uniqueIp())).statusCode, 200);
  store.close();
});

test('a success clears the failures of its (account, address) only, and is never counted itself', async () => {
  const clock = manualClock();
  const store = new MemoryCounterStore(clock);
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { clock, deps: { loginCounterStore: store } });
  const ip = uniqueIp();
  const keys = accountsLoginKeys(victim.email, ip);
  await store.hit(keys.pair, WINDOW_MS, PAIR_MAX - 1);
  assert.equal((await login(app, victim.email, PASSWORD, ip)).statusCode, 200);
  assert.equal(await store.peek(keys.pair), undefined);
  assert.equal((await store.peek(keys.account))?.count ?? 0, 0, 'the success took no count on the account');
  await store.hit(keys.pair, WINDOW_MS, PAIR_MAX - 1);
  assertError(await login(app, victim.email, 'wrong password', ip), 401, INVALID_CREDENTIALS);
  assertThrottled(await login(app, victim.email, PASSWORD, ip), 900);
  assert.equal((await store.peek(keys.account))?.count, 1, 'only the real failure counted for the account');
  store.close();
});

test('one address spraying many accounts: 100 distinct accounts may fail from it, then no new one (30 at once, 1 left: 1 comparison)', async () => {
  const store = new MemoryCounterStore();
  const { app, hasher } = await countedApp({ store });
  app.addHook('onClose', async () => store.close());
  const ip = uniqueIp();
  const spray = accountsLoginKeys('', ip).addresses[0]!;
  await store.hit(spray, WINDOW_MS, LOGIN_FAILURE_LIMITS.accountsPerAddress - 1);
  const before = hasher.started.verify;
  const emails = Array.from({ length: 30 }, (_, i) => uniqueEmail(`spray${i}`));
  const responses = await Promise.all(emails.map((email) => login(app, email, 'spray password', ip)));
  assert.deepEqual(statusCounts(responses), { 401: 1, 429: 29 });
  assert.equal(hasher.started.verify - before, 1);
  assert.equal((await store.peek(spray))?.count, LOGIN_FAILURE_LIMITS.accountsPerAddress);
  // An account that already failed from this address is not a new one: it may be retried.
  const failed = emails[responses.findIndex((res) => res.statusCode === 401)]!;
  assertError(await login(app, failed, 'another password', ip), 401, INVALID_CREDENTIALS);
  assertError(await login(app, uniqueEmail('never-failed'), 'spray password', ip), 429, /^Too many failed login attempts/);
  // Another address is not affected.
  assertError(await login(app, uniqueEmail('never-failed'), 'spray password', uniqueIp()), 401, INVALID_CREDENTIALS);
});

test('IPv6: a client rotating through the /64s of its /48 is still limited, at 16 times the limit of one /64', async () => {
  const store = new MemoryCounterStore();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' }, { deps: { loginCounterStore: store } });
  app.addHook('onClose', async () => store.close());
  const site = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}`;
  const wide = accountsLoginKeys('', `${site}::1`).addresses[1]!;
  assert.equal(wide, `accounts-from:${site}::/48`);
  await store.hit(wide, WINDOW_MS, LOGIN_FAILURE_LIMITS.accountsPerAddress * 16 - 1);
  assertError(await login(app, uniqueEmail('v6'), 'spray password', `${site}:1::1`), 401, INVALID_CREDENTIALS);
  // A fresh /64 of the same /48: refused; a /64 of another /48: not.
  assertThrottled(await login(app, uniqueEmail('v6'), 'spray password', `${site}:2::1`), 900);
  assertError(await login(app, uniqueEmail('v6'), 'spray password', `2001:db9::1`), 401, INVALID_CREDENTIALS);
});

test('refused logins add one audit row per refusing limit and window, not one per refusal (2,000 refused: at most 2 rows)', async () => {
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1', LOG_LEVEL: 'info' });
  const ip = uniqueIp();
  const email = uniqueEmail('flood');
  const rows = async () =>
    (await suite.pool.query(`SELECT count(*)::int AS n FROM audit_log WHERE ip = $1 AND event = 'login_throttled'`, [ip])).rows[0].n;
  for (let i = 0; i < PAIR_MAX; i++) assertError(await login(app, email, 'wrong password', ip), 401, INVALID_CREDENTIALS);
  let refused = 0;
  for (let round = 0; round < 20; round++) {
    const batch = await Promise.all(Array.from({ length: 100 }, () => login(app, email, 'wrong password', ip)));
    refused += statusCounts(batch)[429] ?? 0;
  }
  assert.equal(refused, 2000);
  assert.ok((await rows()) >= 1 && (await rows()) <= 2, `${await rows()} login_throttled rows`);
  const { rows: audit } = await suite.pool.query(`SELECT details FROM audit_log WHERE ip = $1 AND event = 'login_throttled'`, [ip]);
  assert.equal(audit[0].details.limit, 'account_and_address');
  assert.ok(!Number.isNaN(Date.parse(audit[0].details.until)));
});

test('throttling is logged once per window, with the email digest and the IP, never the email or password', async () => {
  const clock = manualClock();
  const store = new MemoryCounterStore(clock);
  const logs = new LogCapture();
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1', LOG_LEVEL: 'info' }, { clock, deps: { loginCounterStore: store }, logs });
  const ip = uniqueIp();
  await store.hit(accountsLoginKeys(victim.email, ip).pair, WINDOW_MS, PAIR_MAX);
  assertThrottled(await login(app, victim.email, 'attempted password', ip), 900);
  assertThrottled(await login(app, victim.email, 'attempted password', ip), 900);
  const lines = logs.lines().filter((l) => l.event === 'login_throttled');
  assert.equal(lines.length, 1, logs.text());
  assert.equal(lines[0]!.emailHash, emailDigester(TEST_SECRET)(victim.email));
  assert.equal(lines[0]!.ip, ip);
  assert.ok(!logs.text().includes(victim.email) && !logs.text().includes('attempted password'));
  store.close();
});

test('the audit log names an email by an HMAC under a server key: not its SHA-256, the same for the same email', async () => {
  const app = await suite.app({ TRUST_PROXY: '127.0.0.1' });
  const ip = uniqueIp();
  const email = uniqueEmail('digest');
  for (let i = 0; i < 2; i++) assertError(await login(app, email, 'wrong password', ip), 401, INVALID_CREDENTIALS);
  const { rows } = await suite.pool.query(`SELECT details FROM audit_log WHERE ip = $1 AND event = 'login_failed' ORDER BY id`, [ip]);
  assert.equal(rows.length, 2);
  const [first, second] = rows.map((row) => row.details.email_hmac);
  assert.match(first, /^[0-9a-f]{64}$/);
  assert.equal(second, first);
  assert.notEqual(first, createHash('sha256').update(email).digest('hex'));
  assert.equal(rows[0].details.email_sha256, undefined);
  // Another key gives another digest: it is keyed, not a plain hash.
  assert.notEqual(emailDigester(`${TEST_SECRET}-other`)(email), first);
  assert.equal(emailDigester(TEST_SECRET)(email), first);
});

test('with REDIS_URL, 150 concurrent guesses split over two instances: at most 10 bcrypt comparisons in all', {
  skip: withoutRedis,
}, async () => {
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
    const right = new Set([30, 31, 100, 149]);
    const responses = await Promise.all(
      Array.from({ length: 150 }, (_, i) => login(i % 2 ? first.app : second.app, email, right.has(i) ? PASSWORD : `wrong guess ${i}`, ip)),
    );
    assert.deepEqual(statusCounts(responses), { 401: PAIR_MAX, 429: 150 - PAIR_MAX });
    for (const i of right) assert.equal(responses[i]!.statusCode, 429);
    assert.equal(first.hasher.started.verify + second.hasher.started.verify - before, PAIR_MAX, 'bcrypt comparisons, both instances');
    const keys = accountsLoginKeys(email, ip);
    assert.equal(await redis.get(`accounts:login-failures:${keys.pair}`), String(PAIR_MAX), 'refused guesses are not counted');
    assert.equal(await redis.get(`accounts:login-failures:${keys.account}`), String(PAIR_MAX));
    assert.equal(await redis.get(`accounts:login-failures:${keys.addresses[0]}`), '1', 'one distinct account failed from the address');
    // The second instance never saw the failures itself; the owner elsewhere gets in through it.
    assertError(await login(second.app, email, PASSWORD, ip), 429, /^Too many failed login attempts/);
    assert.equal((await login(second.app, email, PASSWORD, uniqueIp())).statusCode, 200);
    await redis.del(...[keys.pair, keys.account, ...keys.addresses].map((key) => `accounts:login-failures:${key}`));
  } finally {
    redis.disconnect();
    other.disconnect();
  }
});

noSecretInAnyResponse();
