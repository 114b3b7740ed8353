// Supabase Auth's rate limits on the idp, driven by the unmodified supabase-js over real HTTP:
// per client address on /token (sign-in and refresh alike) and /signup, for the whole service on
// confirmation emails, and on failed password sign-ins per (account, address), per account and per
// address, which must hold when many wrong passwords arrive at once and never lock an owner out.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuthApiError, type SupabaseClient } from '@supabase/supabase-js';
import { loadConfig } from '../src/kit/config.js';
import { idpConfig } from '../src/idp/config.js';
import { type RunningIdp, startIdp, TEST_PUBLISHABLE_KEY, TEST_SECRET_KEY } from './helpers/idp.js';
import { uniqueEmail } from './helpers/emails.js';
import { withoutRedis } from './helpers/redis.js';
import { supabase } from './helpers/supabase.js';
import { idpRequest } from './helpers/http.js';
import { uniqueIp } from './helpers/client-ips.js';
import { startAll } from './helpers/services.js';

const TOKEN_LIMIT = 5;
const SIGNUP_LIMIT = 3;
const LOGIN_FAILURES = 10;
const EMAILS_PER_HOUR = 2;
const PASSWORD = 'correct-horse-battery-1';

let idp: RunningIdp; // trusts X-Forwarded-For from 127.0.0.1, so each test names its own client address
let confirming: RunningIdp; // autoconfirm off: every sign-up sends a confirmation email
let untrusting: RunningIdp; // trusts no proxy

const lowLimits = {
  IDP_RATE_LIMIT_TOKEN_REFRESH: String(TOKEN_LIMIT),
  IDP_RATE_LIMIT_OTP: String(SIGNUP_LIMIT),
  IDP_RATE_LIMIT_LOGIN_FAILURES: String(LOGIN_FAILURES),
};

before(async () => {
  [idp, confirming, untrusting] = await startAll([
    startIdp({ env: { ...lowLimits, TRUST_PROXY: '127.0.0.1' } }),
    startIdp({ env: { IDP_RATE_LIMIT_EMAIL_SENT: String(EMAILS_PER_HOUR), TRUST_PROXY: '127.0.0.1', IDP_AUTOCONFIRM: 'false' } }),
    startIdp({ env: { ...lowLimits } }),
  ]);
});
after(async () => {
  await Promise.all([idp?.close(), confirming?.close(), untrusting?.close()]);
});

/** supabase-js as the helper builds it, with the header a trusted proxy adds for a client at `ip`. */
function clientAt(target: RunningIdp, ip: string): SupabaseClient {
  return supabase(target, target.publishableKey, { 'X-Forwarded-For': ip });
}

function assertRateLimited(error: unknown, code: string, message: string) {
  assert.ok(error instanceof AuthApiError, `expected an AuthApiError, got ${String(error)}`);
  assert.equal(error.status, 429);
  assert.equal(error.code, code);
  assert.equal(error.message, message);
}

function assertRetryAfter(headers: Headers, max: number) {
  const value = headers.get('retry-after');
  assert.match(value ?? '', /^\d+$/, 'Retry-After in whole seconds');
  assert.ok(Number(value) >= 1 && Number(value) <= max, `Retry-After ${value} within 1..${max}`);
}

async function adminCreate(target: RunningIdp, email: string, password = PASSWORD): Promise<void> {
  const res = await idpRequest(target, 'POST', '/auth/v1/admin/users', {
    apikey: target.secretKey,
    body: { email, password, email_confirm: true },
  });
  assert.equal(res.status, 200, res.text);
}

describe('per client address (GoTrue: GOTRUE_RATE_LIMIT_TOKEN_REFRESH, GOTRUE_RATE_LIMIT_OTP)', () => {
  test('sign-in: past the /token limit, 429 over_request_rate_limit with Retry-After; another address is unaffected', async () => {
    const ip = uniqueIp();
    const client = clientAt(idp, ip);
    for (let i = 0; i < TOKEN_LIMIT; i++) {
      const { error } = await client.auth.signInWithPassword({ email: uniqueEmail('wrong'), password: 'not-it' });
      assert.ok(error instanceof AuthApiError);
      assert.equal(error.code, 'invalid_credentials', `attempt ${i + 1} reaches the password check`);
    }
    const { error } = await client.auth.signInWithPassword({ email: uniqueEmail('wrong'), password: 'not-it' });
    assertRateLimited(error, 'over_request_rate_limit', 'Request rate limit reached');

    // The wire: the versioned body, GoTrue's header, and a Retry-After within the 5-minute window.
    const raw = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', {
      headers: { 'x-forwarded-for': ip },
      body: { email: 'a@example.com', password: 'x' },
    });
    assert.equal(raw.status, 429);
    assert.deepEqual(raw.body, { code: 'over_request_rate_limit', message: 'Request rate limit reached' });
    assert.equal(raw.headers.get('x-sb-error-code'), 'over_request_rate_limit');
    assertRetryAfter(raw.headers, 300);
    // Clients before the versioned API get the legacy shape.
    const legacy = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', {
      headers: { 'x-forwarded-for': ip, 'x-supabase-api-version': '' },
      body: { email: 'a@example.com', password: 'x' },
    });
    assert.deepEqual(legacy.body, { code: 429, error_code: 'over_request_rate_limit', msg: 'Request rate limit reached' });

    const other = await clientAt(idp, uniqueIp()).auth.signInWithPassword({ email: uniqueEmail('wrong'), password: 'not-it' });
    assert.equal((other.error as AuthApiError).code, 'invalid_credentials');
  });

  test('refresh shares the /token limit with sign-in, as in GoTrue', async () => {
    const ip = uniqueIp();
    const client = clientAt(idp, ip);
    const email = uniqueEmail('refresh');
    await adminCreate(idp, email);
    const signedIn = await client.auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(signedIn.error, null);
    let refreshToken = signedIn.data.session!.refresh_token;
    for (let i = 1; i < TOKEN_LIMIT; i++) {
      const { data, error } = await client.auth.refreshSession({ refresh_token: refreshToken });
      assert.equal(error, null, `refresh ${i}`);
      refreshToken = data.session!.refresh_token;
    }
    const { error } = await client.auth.refreshSession({ refresh_token: refreshToken });
    assertRateLimited(error, 'over_request_rate_limit', 'Request rate limit reached');
  });

  test('sign-up: past the /signup limit, 429 over_request_rate_limit; no user is created', async () => {
    const client = clientAt(idp, uniqueIp());
    for (let i = 0; i < SIGNUP_LIMIT; i++) {
      const { error } = await client.auth.signUp({ email: uniqueEmail('signup'), password: PASSWORD });
      assert.equal(error, null, `sign-up ${i + 1}`);
    }
    const refused = uniqueEmail('refused');
    const { error } = await client.auth.signUp({ email: refused, password: PASSWORD });
    assertRateLimited(error, 'over_request_rate_limit', 'Request rate limit reached');
    const later = await clientAt(idp, uniqueIp()).auth.signInWithPassword({ email: refused, password: PASSWORD });
    assert.equal((later.error as AuthApiError).code, 'invalid_credentials');
  });

  test('many /64s of one IPv6 /48 together get 16 times the /token limit; another /48 is unaffected', async () => {
    const site = `2001:db8:${Math.floor(Math.random() * 0xffff).toString(16)}`;
    const signIn = (ip: string) =>
      idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', {
        headers: { 'x-forwarded-for': ip },
        body: { email: uniqueEmail('wide'), password: 'not-it' },
      });
    // 16 /64s, each within its own limit, spend the /48's 16x.
    for (let i = 0; i < 16 * TOKEN_LIMIT; i++) {
      const res = await signIn(`${site}:${(i % 16).toString(16)}::1`);
      assert.equal(res.status, 400, `request ${i + 1}`);
    }
    const fresh = await signIn(`${site}:ff::1`);
    assert.equal(fresh.status, 429);
    assert.deepEqual(fresh.body, { code: 'over_request_rate_limit', message: 'Request rate limit reached' });
    const otherSite = `2001:db9:${Math.floor(Math.random() * 0xffff).toString(16)}::1`;
    assert.equal((await signIn(otherSite)).status, 400);
  });

  test('an X-Forwarded-For from an untrusted peer is ignored: every such request counts against the peer', async () => {
    const headersOf = (i: number) => ({ 'x-forwarded-for': `192.0.2.${i}` });
    const statuses: number[] = [];
    for (let i = 0; i <= TOKEN_LIMIT; i++) {
      const res = await idpRequest(untrusting, 'POST', '/auth/v1/token?grant_type=password', {
        headers: headersOf(i),
        body: { email: uniqueEmail('spoof'), password: 'x' },
      });
      statuses.push(res.status);
    }
    assert.deepEqual(statuses, [...Array(TOKEN_LIMIT).fill(400), 429]);
  });
});

describe('confirmation emails (GoTrue: GOTRUE_RATE_LIMIT_EMAIL_SENT, for the whole service)', () => {
  test('past the hourly count, sign-ups that would send one get 429 over_email_send_rate_limit, whatever the address', async () => {
    for (let i = 0; i < EMAILS_PER_HOUR; i++) {
      const { data, error } = await clientAt(confirming, uniqueIp()).auth.signUp({ email: uniqueEmail('confirm'), password: PASSWORD });
      assert.equal(error, null);
      assert.equal(data.session, null, 'a user awaiting confirmation');
    }
    const { error } = await clientAt(confirming, uniqueIp()).auth.signUp({ email: uniqueEmail('confirm'), password: PASSWORD });
    assertRateLimited(error, 'over_email_send_rate_limit', 'email rate limit exceeded');
    const raw = await idpRequest(confirming, 'POST', '/auth/v1/signup', {
      headers: { 'x-forwarded-for': uniqueIp() },
      body: { email: uniqueEmail('confirm'), password: PASSWORD },
    });
    assert.equal(raw.status, 429);
    assertRetryAfter(raw.headers, 3600);
  });
});

describe('failed password sign-ins per (account, address), per account and per address', () => {
  const PER_ACCOUNT = 150;
  const ACCOUNTS_PER_ADDRESS = 20;
  let signIns: RunningIdp; // the /token limit out of the way, to see the sign-in limits alone
  before(async () => {
    signIns = await startIdp({
      env: {
        TRUST_PROXY: '127.0.0.1',
        IDP_RATE_LIMIT_TOKEN_REFRESH: '1000000',
        IDP_RATE_LIMIT_LOGIN_FAILURES: String(LOGIN_FAILURES),
        IDP_RATE_LIMIT_LOGIN_FAILURES_PER_ACCOUNT: String(PER_ACCOUNT),
        IDP_RATE_LIMIT_LOGIN_ACCOUNTS_PER_ADDRESS: String(ACCOUNTS_PER_ADDRESS),
      },
    });
  });
  after(() => signIns?.close());
  const codesOf = (results: Array<{ error: unknown }>) => results.map((r) => (r.error as AuthApiError | null)?.code ?? 'signed in');
  const tally = (codes: string[]) => Object.fromEntries([...new Set(codes)].map((c) => [c, codes.filter((x) => x === c).length]));

  test(`200 concurrent guesses from one address: exactly ${LOGIN_FAILURES} reach the password check, even the right one is refused after`, async () => {
    const email = uniqueEmail('parallel');
    await adminCreate(signIns, email);
    const ip = uniqueIp();
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => clientAt(signIns, ip).auth.signInWithPassword({ email, password: `guess-${i}` })),
    );
    // invalid_credentials is only answered after the password was checked: that count is the number of checks.
    assert.deepEqual(tally(codesOf(results)), { invalid_credentials: LOGIN_FAILURES, over_request_rate_limit: 200 - LOGIN_FAILURES });
    const rightOne = await clientAt(signIns, ip).auth.signInWithPassword({ email, password: PASSWORD });
    assertRateLimited(rightOne.error, 'over_request_rate_limit', 'Too many failed sign-in attempts for this account, try again later');
    const raw = await idpRequest(signIns, 'POST', '/auth/v1/token?grant_type=password', {
      headers: { 'x-forwarded-for': ip },
      body: { email: email.toUpperCase(), password: PASSWORD },
    });
    assert.equal(raw.status, 429, 'the same account however the address is cased');
    assertRetryAfter(raw.headers, 15 * 60);
  });

  test('owner lockout: guesses from 10 addresses leave the owner signing in from another', async () => {
    const email = uniqueEmail('owner');
    await adminCreate(signIns, email);
    const attackers = Array.from({ length: 10 }, () => uniqueIp());
    const results = await Promise.all(
      attackers.flatMap((ip) =>
        Array.from({ length: 15 }, (_, i) => clientAt(signIns, ip).auth.signInWithPassword({ email, password: `guess-${i}` })),
      ),
    );
    assert.deepEqual(tally(codesOf(results)), { invalid_credentials: 10 * LOGIN_FAILURES, over_request_rate_limit: 50 });
    const owner = await clientAt(signIns, uniqueIp()).auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(owner.error, null);
  });

  test('NAT lockout: 100 failures from one address do not lock its other users out', async () => {
    const [victim, colleague] = [uniqueEmail('nat-victim'), uniqueEmail('nat-colleague')];
    await Promise.all([adminCreate(signIns, victim), adminCreate(signIns, colleague)]);
    const office = uniqueIp();
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => clientAt(signIns, office).auth.signInWithPassword({ email: victim, password: `guess-${i}` })),
    );
    assert.equal(codesOf(results).filter((c) => c === 'invalid_credentials').length, LOGIN_FAILURES);
    const typo = await clientAt(signIns, office).auth.signInWithPassword({ email: colleague, password: 'a typo' });
    assert.equal((typo.error as AuthApiError).code, 'invalid_credentials');
    assert.equal((await clientAt(signIns, office).auth.signInWithPassword({ email: colleague, password: PASSWORD })).error, null);
    // The guessed owner too, from elsewhere.
    assert.equal((await clientAt(signIns, uniqueIp()).auth.signInWithPassword({ email: victim, password: PASSWORD })).error, null);
  });

  test(`a guess spread over many addresses stops at ${PER_ACCOUNT} failures per account (not where the owner signed in before); a spray stops at ${ACCOUNTS_PER_ADDRESS} accounts per address`, async () => {
    const email = uniqueEmail('distributed');
    await adminCreate(signIns, email);
    const home = uniqueIp();
    assert.equal((await clientAt(signIns, home).auth.signInWithPassword({ email, password: PASSWORD })).error, null);
    const results = await Promise.all(
      Array.from({ length: 20 }, () => uniqueIp()).flatMap((ip) =>
        Array.from({ length: LOGIN_FAILURES }, (_, i) => clientAt(signIns, ip).auth.signInWithPassword({ email, password: `guess-${i}` })),
      ),
    );
    assert.equal(codesOf(results).filter((c) => c === 'invalid_credentials').length, PER_ACCOUNT);
    const late = await clientAt(signIns, uniqueIp()).auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal((late.error as AuthApiError).code, 'over_request_rate_limit');
    // Where the owner signed in before, the ceiling does not apply.
    assert.equal((await clientAt(signIns, home).auth.signInWithPassword({ email, password: PASSWORD })).error, null);

    const sprayer = uniqueIp();
    const spray = await Promise.all(
      Array.from({ length: ACCOUNTS_PER_ADDRESS + 10 }, () =>
        clientAt(signIns, sprayer).auth.signInWithPassword({ email: uniqueEmail('spray'), password: 'wrong' }),
      ),
    );
    assert.deepEqual(tally(codesOf(spray)), { invalid_credentials: ACCOUNTS_PER_ADDRESS, over_request_rate_limit: 10 });
  });

  test("a success clears the pair's failures; an unknown address is limited like a known one", async () => {
    const email = uniqueEmail('forgetful');
    await adminCreate(signIns, email);
    const ip = uniqueIp();
    for (let i = 0; i < LOGIN_FAILURES - 1; i++) {
      const { error } = await clientAt(signIns, ip).auth.signInWithPassword({ email, password: 'wrong' });
      assert.equal((error as AuthApiError).code, 'invalid_credentials');
    }
    assert.equal((await clientAt(signIns, ip).auth.signInWithPassword({ email, password: PASSWORD })).error, null);
    for (let i = 0; i < LOGIN_FAILURES; i++) {
      const { error } = await clientAt(signIns, ip).auth.signInWithPassword({ email, password: 'wrong' });
      assert.equal((error as AuthApiError).code, 'invalid_credentials', `failure ${i + 1} after the success`);
    }
    const nobody = uniqueEmail('nobody');
    const codes: string[] = [];
    for (let i = 0; i <= LOGIN_FAILURES; i++) {
      const { error } = await clientAt(signIns, ip).auth.signInWithPassword({ email: nobody, password: 'wrong' });
      codes.push((error as AuthApiError).code!);
    }
    assert.deepEqual(codes, [...Array(LOGIN_FAILURES).fill('invalid_credentials'), 'over_request_rate_limit']);
  });

  test('two instances sharing Redis share the counts', { skip: withoutRedis }, async () => {
    const env = { ...lowLimits, IDP_RATE_LIMIT_TOKEN_REFRESH: '1000000', REDIS_URL: process.env.REDIS_URL! };
    const [first, second] = await startAll([startIdp({ env: { ...env } }), startIdp({ env: { ...env } })]);
    try {
      const email = uniqueEmail('shared');
      const attempts = LOGIN_FAILURES + 30;
      const results = await Promise.all(
        Array.from({ length: attempts }, (_, i) =>
          supabase(i % 2 ? first : second).auth.signInWithPassword({ email, password: `guess-${i}` }),
        ),
      );
      const checked = results.filter((r) => (r.error as AuthApiError).code === 'invalid_credentials').length;
      assert.equal(checked, LOGIN_FAILURES);
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });
});

test('defaults let a contract client through (1800 sign-ins and 1000 sign-ups per 5 minutes), 30 emails an hour as GoTrue, 10 failed sign-ins per account; nonsense is refused at start', () => {
  const keys = { IDP_PUBLISHABLE_KEY: TEST_PUBLISHABLE_KEY, IDP_SECRET_KEY: TEST_SECRET_KEY };
  const config = loadConfig(idpConfig, keys);
  assert.equal(config.IDP_RATE_LIMIT_TOKEN_REFRESH, 1800);
  assert.equal(config.IDP_RATE_LIMIT_OTP, 1000);
  assert.equal(config.IDP_RATE_LIMIT_EMAIL_SENT, 30);
  assert.equal(config.IDP_RATE_LIMIT_LOGIN_FAILURES, 10);
  assert.equal(config.IDP_RATE_LIMIT_LOGIN_FAILURES_PER_ACCOUNT, 1000);
  assert.equal(config.IDP_RATE_LIMIT_LOGIN_ACCOUNTS_PER_ADDRESS, 100);
  assert.equal(config.REDIS_URL, undefined);
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_RATE_LIMIT_EMAIL_SENT: '0' }).IDP_RATE_LIMIT_EMAIL_SENT, 0);
  assert.throws(
    () => loadConfig(idpConfig, { ...keys, IDP_RATE_LIMIT_TOKEN_REFRESH: '0' }),
    /IDP_RATE_LIMIT_TOKEN_REFRESH must be at least 1/,
  );
  assert.throws(
    () => loadConfig(idpConfig, { ...keys, IDP_RATE_LIMIT_LOGIN_FAILURES: 'ten' }),
    /IDP_RATE_LIMIT_LOGIN_FAILURES must be a whole number/,
  );
  assert.throws(() => loadConfig(idpConfig, { ...keys, REDIS_URL: 'http://localhost' }), /REDIS_URL must start with redis:/);
});
