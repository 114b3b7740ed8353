// bcrypt work is bounded: registrations are limited per IP before any hashing,
// the hashing queues are bounded (a full one is a 503 with Retry-After, never
// a 500), and a login is served before queued registrations. Real bcrypt on
// the kit's worker threads; assertions on counts and order, never on time.
import assert from 'node:assert/strict';
import { randomInt } from 'node:crypto';
import { test } from 'node:test';
import { accountsPasswordHasher } from '../src/accounts/passwords.js';
import type { App } from '../src/kit/http/app.js';
import type { HashJobKind, PasswordHasher } from '../src/kit/password-hasher.js';
import { MemoryCounterStore } from '../src/kit/rate-limit.js';
import { type Response, accountsLoginKeys, accountsSuite, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';
import { uniqueIp } from './helpers/client-ips.js';

const suite = accountsSuite();
const PASSWORD = 'the right password';

const from = (ip: string) => ({ 'x-forwarded-for': ip });
const register = (app: App, ip: string, label = 'user') =>
  json(app, 'POST', '/auth/register', { name: 'Load Test', email: uniqueEmail(label), password: PASSWORD }, from(ip));

function statusCounts(responses: Response[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const res of responses) counts[res.statusCode] = (counts[res.statusCode] ?? 0) + 1;
  return counts;
}

/** Waits, a few ms at a time, until `ready` holds (bounded). */
async function until(ready: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

async function appWith(hasher: PasswordHasher, env: Record<string, string> = {}, store?: MemoryCounterStore): Promise<App> {
  const app = await suite.app(
    { TRUST_PROXY: '127.0.0.1', ...env },
    { deps: { passwordHasher: hasher, ...(store ? { loginCounterStore: store } : {}) } },
  );
  app.addHook('onClose', async () => {
    store?.close();
    await hasher.close();
  });
  return app;
}

function assertServiceBusy(res: Response): void {
  assert.equal(res.statusCode, 503, res.body);
  const body = res.json() as { status: number; response: string; message: string };
  assert.equal(body.status, 503);
  assert.equal(body.response, 'Service Unavailable');
  assert.match(body.message, /^Server busy, try again in \d+ seconds\.$/);
  const retryAfter = Number(res.headers['retry-after']);
  assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `retry-after ${res.headers['retry-after']}`);
}

test('registrations are limited per IP (REGISTER_MAX_PER_IP), counted before any hashing: 429 + Retry-After', async () => {
  const hasher = accountsPasswordHasher();
  const app = await appWith(hasher, { REGISTER_MAX_PER_IP: '3', REGISTER_WINDOW: '1h' });
  const ip = uniqueIp();
  const before = hasher.started.hash;
  const responses = await Promise.all(Array.from({ length: 8 }, () => register(app, ip)));
  assert.deepEqual(statusCounts(responses), { 201: 3, 429: 5 });
  assert.equal(hasher.started.hash - before, 3, 'a refused registration costs no bcrypt hash');
  for (const res of responses.filter((r) => r.statusCode === 429)) {
    assert.deepEqual(res.json(), {
      status: 429,
      response: 'Too Many Requests',
      message: `Too many registrations from this address, try again in ${res.headers['retry-after']} seconds.`,
    });
    const retryAfter = Number(res.headers['retry-after']);
    assert.ok(retryAfter > 3500 && retryAfter <= 3600, `retry-after ${retryAfter}`);
  }
  // Another address is not affected, and logins are not limited by it.
  assert.equal((await register(app, uniqueIp())).statusCode, 201);
});

test('the registration and login limits count one client however its address is spelled, and IPv6 per /64', async () => {
  const hasher = accountsPasswordHasher();
  const app = await appWith(hasher, { REGISTER_MAX_PER_IP: '3', REGISTER_WINDOW: '1h' });
  const a = randomInt(256);
  const b = randomInt(1, 255);
  // Four spellings of one IPv4 client (mapped, zero-padded) behind the trusted proxy.
  const spellings = [
    `198.51.${a}.${b}`,
    `::ffff:198.51.${a}.${b}`,
    `198.051.${String(a).padStart(3, '0')}.${String(b).padStart(3, '0')}`,
    `198.51.${a}.${b}`,
  ];
  const v4 = await Promise.all(spellings.map((ip, i) => register(app, ip, `spell${i}`)));
  assert.deepEqual(statusCounts(v4), { 201: 3, 429: 1 });
  // Four addresses of one IPv6 /64 are one client; the next /64 is another.
  const net = `2001:db8:${randomInt(0xffff).toString(16)}:${randomInt(0xffff).toString(16)}`;
  const v6 = await Promise.all([1, 2, 3, 4].map((host) => register(app, `${net}::${host}`, `v6host${host}`)));
  assert.deepEqual(statusCounts(v6), { 201: 3, 429: 1 });
  const otherNet = `2001:db8:${randomInt(0xffff).toString(16)}:${(randomInt(0xffff) ^ 1).toString(16)}`;
  assert.notEqual(otherNet, net);
  assert.equal((await register(app, `${otherNet}::1`, 'othernet')).statusCode, 201);
});

test('a full registration queue answers 503 with Retry-After in the envelope, never a 500', async () => {
  const hasher = accountsPasswordHasher({ workers: 1, maxQueued: 2 });
  const app = await appWith(hasher);
  const responses = await Promise.all(Array.from({ length: 8 }, (_, i) => register(app, uniqueIp(), `queue${i}`)));
  const counts = statusCounts(responses);
  assert.deepEqual(Object.keys(counts).sort(), ['201', '503'], JSON.stringify(counts));
  // One running and two waiting are served; the rest were refused at once.
  assert.ok(counts[201]! >= 3, JSON.stringify(counts));
  for (const res of responses.filter((r) => r.statusCode === 503)) assertServiceBusy(res);
});

test('a login refused by a full queue is a 503 and its guess is given back to the failure counters', async () => {
  const store = new MemoryCounterStore();
  const hasher = accountsPasswordHasher({ workers: 1, maxQueued: 1 });
  const app = await appWith(hasher, {}, store);
  const email = uniqueEmail('busy');
  await registerUser(app, { name: 'Busy', email, password: PASSWORD });
  const ip = uniqueIp();
  const responses = await Promise.all(
    Array.from({ length: 6 }, (_, i) => json(app, 'POST', '/auth/login', { email, password: `wrong guess ${i}` }, from(ip))),
  );
  const counts = statusCounts(responses);
  assert.ok((counts[503] ?? 0) >= 1 && (counts[401] ?? 0) >= 2, JSON.stringify(counts));
  assert.deepEqual(Object.keys(counts).sort(), ['401', '503']);
  for (const res of responses.filter((r) => r.statusCode === 503)) assertServiceBusy(res);
  // Only the guesses that were really checked count as failures.
  const keys = accountsLoginKeys(email, ip);
  assert.equal((await store.peek(keys.pair))?.count, counts[401]);
  assert.equal((await store.peek(keys.account))?.count, counts[401]);
});

test('a login during a registration flood overtakes every queued registration (waits for the running job only)', async () => {
  const starts: Array<{ kind: HashJobKind; hashesWaiting: number }> = [];
  const hasher = accountsPasswordHasher({ workers: 1, onStart: (kind, waiting) => starts.push({ kind, hashesWaiting: waiting.hash }) });
  const app = await appWith(hasher);
  const email = uniqueEmail('during');
  await registerUser(app, { name: 'During', email, password: PASSWORD });
  starts.length = 0;
  const flood = Promise.all(Array.from({ length: 12 }, (_, i) => register(app, uniqueIp(), `flood${i}`)));
  await until(() => hasher.queued.hash >= 8, 'the registrations to queue');
  const hashesStartedBeforeLogin = starts.length;
  const res = await json(app, 'POST', '/auth/login', { email, password: PASSWORD }, from(uniqueIp()));
  assert.equal(res.statusCode, 200, res.body);
  assert.deepEqual(statusCounts(await flood), { 201: 12 });
  const verifyAt = starts.findIndex((s) => s.kind === 'verify');
  assert.ok(verifyAt >= 0, 'the login was checked by the hasher');
  // At most the one job running when the login arrived (one worker) started before it...
  assert.ok(verifyAt - hashesStartedBeforeLogin <= 1, `${verifyAt - hashesStartedBeforeLogin} registrations started before the login`);
  // ...while most of the flood was still waiting behind it.
  assert.ok(starts[verifyAt]!.hashesWaiting >= 6, `${starts[verifyAt]!.hashesWaiting} registrations were still waiting`);
});

noSecretInAnyResponse();
