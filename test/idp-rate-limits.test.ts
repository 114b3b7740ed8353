// Supabase Auth's rate limits on the idp, driven by the unmodified supabase-js over real HTTP:
// per client address on /token (sign-in and refresh alike) and /signup, for the whole service on
// confirmation emails, and per account on failed password sign-ins, which must hold when many
// wrong passwords arrive at once.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuthApiError, type SupabaseClient } from '@supabase/supabase-js';
import { loadConfig } from '../src/kit/config.js';
import { idpConfig } from '../src/idp/config.js';
import { type RunningIdp, startIdp, TEST_PUBLISHABLE_KEY, TEST_SECRET_KEY } from './helpers/idp.js';
import { uniqueEmail } from './helpers/emails.js';
import { withoutRedis } from './helpers/redis.js';
import { supabase } from './helpers/supabase.js';
import { http } from './helpers/http.js';
import { uniqueIp } from './helpers/client-ips.js';

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
  [idp, confirming, untrusting] = await Promise.all([
    startIdp({ env: { ...lowLimits, TRUST_PROXY: '127.0.0.1' } }),
    startIdp({ autoconfirm: false, env: { IDP_RATE_LIMIT_EMAIL_SENT: String(EMAILS_PER_HOUR), TRUST_PROXY: '127.0.0.1' } }),
    startIdp({ env: lowLimits }),
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
  const res = await http(target, '/auth/v1/admin/users', { method: 'POST', apikey: target.secretKey, body: { email, password, email_confirm: true } });
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
    const raw = await http(idp, '/auth/v1/token?grant_type=password', { method: 'POST', headers: { 'x-forwarded-for': ip }, body: { email: 'a@example.com', password: 'x' } });
    assert.equal(raw.status, 429);
    assert.deepEqual(raw.json, { code: 'over_request_rate_limit', message: 'Request rate limit reached' });
    assert.equal(raw.headers.get('x-sb-error-code'), 'over_request_rate_limit');
    assertRetryAfter(raw.headers, 300);
    // Clients before the versioned API get the legacy shape.
    const legacy = await http(idp, '/auth/v1/token?grant_type=password', {
      method: 'POST',
      headers: { 'x-forwarded-for': ip, 'x-supabase-api-version': '' },
      body: { email: 'a@example.com', password: 'x' },
    });
    assert.deepEqual(legacy.json, { code: 429, error_code: 'over_request_rate_limit', msg: 'Request rate limit reached' });

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

  test('an X-Forwarded-For from an untrusted peer is ignored: every such request counts against the peer', async () => {
    const headersOf = (i: number) => ({ 'x-forwarded-for': `192.0.2.${i}` });
    const statuses: number[] = [];
    for (let i = 0; i <= TOKEN_LIMIT; i++) {
      const res = await http(untrusting, '/auth/v1/token?grant_type=password', { method: 'POST', headers: headersOf(i), body: { email: uniqueEmail('spoof'), password: 'x' } });
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
    const raw = await http(confirming, '/auth/v1/signup', { method: 'POST', headers: { 'x-forwarded-for': uniqueIp() }, body: { email: uniqueEmail('confirm'), password: PASSWORD } });
    assert.equal(raw.status, 429);
    assertRetryAfter(raw.headers, 3600);
  });
});

describe('failed password sign-ins per account', () => {
  test(`${LOGIN_FAILURES + 50} concurrent wrong passwords from as many addresses: exactly ${LOGIN_FAILURES} reach the password check, then even the right one is refused`, async () => {
    const email = uniqueEmail('victim');
    await adminCreate(idp, email);
    const attempts = LOGIN_FAILURES + 50;
    const results = await Promise.all(
      Array.from({ length: attempts }, (_, i) => clientAt(idp, uniqueIp()).auth.signInWithPassword({ email, password: `guess-${i}` })),
    );
    const codes = results.map((r) => (r.error as AuthApiError | null)?.code ?? 'signed in');
    const count = (code: string) => codes.filter((c) => c === code).length;
    // invalid_credentials is only answered after the password was checked: that count is the number of checks.
    assert.equal(count('invalid_credentials'), LOGIN_FAILURES, codes.join(','));
    assert.equal(count('over_request_rate_limit'), attempts - LOGIN_FAILURES);

    const rightOne = await clientAt(idp, uniqueIp()).auth.signInWithPassword({ email, password: PASSWORD });
    assertRateLimited(rightOne.error, 'over_request_rate_limit', 'Too many failed sign-in attempts for this account, try again later');
    const raw = await http(idp, '/auth/v1/token?grant_type=password', { method: 'POST', headers: { 'x-forwarded-for': uniqueIp() }, body: { email: email.toUpperCase(), password: PASSWORD } });
    assert.equal(raw.status, 429, 'the same account however the address is cased');
    assertRetryAfter(raw.headers, 15 * 60);
  });

  test('a success clears the account\'s failures; an unknown address is limited like a known one', async () => {
    const email = uniqueEmail('forgetful');
    await adminCreate(idp, email);
    for (let i = 0; i < LOGIN_FAILURES - 1; i++) {
      const { error } = await clientAt(idp, uniqueIp()).auth.signInWithPassword({ email, password: 'wrong' });
      assert.equal((error as AuthApiError).code, 'invalid_credentials');
    }
    const ok = await clientAt(idp, uniqueIp()).auth.signInWithPassword({ email, password: PASSWORD });
    assert.equal(ok.error, null);
    for (let i = 0; i < LOGIN_FAILURES; i++) {
      const { error } = await clientAt(idp, uniqueIp()).auth.signInWithPassword({ email, password: 'wrong' });
      assert.equal((error as AuthApiError).code, 'invalid_credentials', `failure ${i + 1} after the success`);
    }

    const nobody = uniqueEmail('nobody');
    const codes: string[] = [];
    for (let i = 0; i <= LOGIN_FAILURES; i++) {
      const { error } = await clientAt(idp, uniqueIp()).auth.signInWithPassword({ email: nobody, password: 'wrong' });
      codes.push((error as AuthApiError).code!);
    }
    assert.deepEqual(codes, [...Array(LOGIN_FAILURES).fill('invalid_credentials'), 'over_request_rate_limit']);
  });

  test('two instances sharing Redis share the per-account count', { skip: withoutRedis }, async () => {
    const env = { ...lowLimits, IDP_RATE_LIMIT_TOKEN_REFRESH: '1000000', REDIS_URL: process.env.REDIS_URL! };
    const [first, second] = await Promise.all([startIdp({ env }), startIdp({ env })]);
    try {
      const email = uniqueEmail('shared');
      const attempts = LOGIN_FAILURES + 30;
      const results = await Promise.all(
        Array.from({ length: attempts }, (_, i) => supabase(i % 2 ? first : second).auth.signInWithPassword({ email, password: `guess-${i}` })),
      );
      const checked = results.filter((r) => (r.error as AuthApiError).code === 'invalid_credentials').length;
      assert.equal(checked, LOGIN_FAILURES);
    } finally {
      await Promise.all([first.close(), second.close()]);
    }
  });
});

test("defaults are GoTrue's (150 and 30 per 5 minutes, 30 emails an hour) plus 10 failed sign-ins per account; nonsense is refused at start", () => {
  const keys = { IDP_PUBLISHABLE_KEY: TEST_PUBLISHABLE_KEY, IDP_SECRET_KEY: TEST_SECRET_KEY };
  const config = loadConfig(idpConfig, keys);
  assert.equal(config.IDP_RATE_LIMIT_TOKEN_REFRESH, 150);
  assert.equal(config.IDP_RATE_LIMIT_OTP, 30);
  assert.equal(config.IDP_RATE_LIMIT_EMAIL_SENT, 30);
  assert.equal(config.IDP_RATE_LIMIT_LOGIN_FAILURES, 10);
  assert.equal(config.REDIS_URL, undefined);
  assert.equal(loadConfig(idpConfig, { ...keys, IDP_RATE_LIMIT_EMAIL_SENT: '0' }).IDP_RATE_LIMIT_EMAIL_SENT, 0);
  assert.throws(() => loadConfig(idpConfig, { ...keys, IDP_RATE_LIMIT_TOKEN_REFRESH: '0' }), /IDP_RATE_LIMIT_TOKEN_REFRESH must be at least 1/);
  assert.throws(() => loadConfig(idpConfig, { ...keys, IDP_RATE_LIMIT_LOGIN_FAILURES: 'ten' }), /IDP_RATE_LIMIT_LOGIN_FAILURES must be a whole number/);
  assert.throws(() => loadConfig(idpConfig, { ...keys, REDIS_URL: 'http://localhost' }), /REDIS_URL must start with redis:/);
});
