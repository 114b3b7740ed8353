// The idp's rate limits as notes' clients meet them, over real HTTP: notes answers the idp's 429
// with its own 429 and a Retry-After (not its generic 401), and names each caller's address to the
// idp, so callers are limited one by one and not as one service.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type RunningIdp, startIdp } from './helpers/idp.js';
import { PASSWORD, type RunningNotes, startNotes } from './helpers/notes.js';
import { uniqueEmail } from './helpers/emails.js';
import { request } from './helpers/http.js';
import { uniqueIp } from './helpers/client-ips.js';
import { startAll } from './helpers/services.js';

const TOKEN_LIMIT = 4;
const SIGNUP_LIMIT = 2;
const LOGIN_FAILURES = 3;

let idp: RunningIdp; // trusts X-Forwarded-For from 127.0.0.1, where notes connects from
let behindProxy: RunningNotes; // trusts X-Forwarded-For from 127.0.0.1: the tests act as its proxy
let exposed: RunningNotes; // trusts no proxy

before(async () => {
  idp = await startIdp({
    env: {
      TRUST_PROXY: '127.0.0.1',
      IDP_RATE_LIMIT_TOKEN_REFRESH: String(TOKEN_LIMIT),
      IDP_RATE_LIMIT_OTP: String(SIGNUP_LIMIT),
      IDP_RATE_LIMIT_LOGIN_FAILURES: String(LOGIN_FAILURES),
    },
  });
  [behindProxy, exposed] = await startAll([startNotes({ idp, env: { TRUST_PROXY: '127.0.0.1' } }), startNotes({ idp })]);
});
after(async () => {
  await Promise.all([behindProxy?.close(), exposed?.close()]);
  await idp?.close();
});

const login = (notes: RunningNotes, email: string, password: string, ip?: string) =>
  request(notes.url, 'POST', '/auth/login', { body: { email, password }, headers: ip ? { 'x-forwarded-for': ip } : {} });
const register = (notes: RunningNotes, email: string, ip: string) =>
  request(notes.url, 'POST', '/auth/register', { body: { email, password: PASSWORD }, headers: { 'x-forwarded-for': ip } });

function assertTooMany(reply: { status: number; body: unknown; headers: Headers }, maxSeconds: number) {
  assert.equal(reply.status, 429, JSON.stringify(reply.body));
  const retryAfter = reply.headers.get('retry-after');
  assert.match(retryAfter ?? '', /^\d+$/);
  assert.ok(Number(retryAfter) >= 1 && Number(retryAfter) <= maxSeconds, `Retry-After ${retryAfter}`);
  assert.deepEqual(reply.body, { message: `Too many attempts, try again in ${retryAfter} seconds` });
}

describe("notes passes the idp's 429 on", () => {
  test("login: past the idp's /token limit, 429 with the idp's Retry-After instead of 401; another caller is unaffected", async () => {
    const ip = uniqueIp();
    for (let i = 0; i < TOKEN_LIMIT; i++) {
      assert.equal((await login(behindProxy, uniqueEmail('wrong'), 'not-it', ip)).status, 401);
    }
    assertTooMany(await login(behindProxy, uniqueEmail('wrong'), 'not-it', ip), 300);
    // A second caller, at another address behind the same proxy, has its own count at the idp.
    assert.equal((await login(behindProxy, uniqueEmail('wrong'), 'not-it', uniqueIp())).status, 401);
  });

  test("register: past the idp's /signup limit, 429 with Retry-After", async () => {
    const ip = uniqueIp();
    for (let i = 0; i < SIGNUP_LIMIT; i++) assert.equal((await register(behindProxy, uniqueEmail('reg'), ip)).status, 201);
    assertTooMany(await register(behindProxy, uniqueEmail('reg'), ip), 300);
  });

  test("login: the idp's per-(account, address) limit refuses the right password from the guessing caller with 429, not the owner elsewhere", async () => {
    const email = uniqueEmail('victim');
    assert.equal((await register(behindProxy, email, uniqueIp())).status, 201);
    const guesser = uniqueIp();
    for (let i = 0; i < LOGIN_FAILURES; i++) assert.equal((await login(behindProxy, email, 'wrong', guesser)).status, 401);
    assertTooMany(await login(behindProxy, email, PASSWORD, guesser), 15 * 60);
    assert.equal((await login(behindProxy, email, PASSWORD, uniqueIp())).status, 200);
  });

  test("without a trusted proxy, a caller's X-Forwarded-For is ignored: every caller counts as notes' own peer", async () => {
    const statuses: number[] = [];
    for (let i = 0; i <= TOKEN_LIMIT; i++) statuses.push((await login(exposed, uniqueEmail('spoof'), 'not-it', uniqueIp())).status);
    assert.deepEqual(statuses, [...Array(TOKEN_LIMIT).fill(401), 429]);
  });
});
