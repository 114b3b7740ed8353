// Property-based tests (fast-check) of every input rule, through the real validation path: the
// exported validators where they exist, and always the HTTP route too (app.inject for the
// shortener and accounts, real HTTP for notes and the idp), so schema and code are covered
// together. The seed is printed; FUZZ_SEED=<seed> replays a failing run.
//
// Decisions this file pins down (README "Reliability and security"):
// - accounts: lengths are counted in Unicode code points after trim (a combining accent or each
//   part of a ZWJ emoji is one), as PostgreSQL's char_length counts; names may not contain
//   control characters; passwords are 8-72 code points and at most 72 UTF-8 bytes, never trimmed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { characterCount, emailProblem, nameProblem, normalizeEmail, passwordProblem } from '../../src/accounts/validation.js';
import { INVALID_EMAIL_TOKEN } from '../../src/accounts/email-flows.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';
import { reportFigures } from './helpers/figures.js';
import { byteLength, envelopeOf, LONE_SURROGATE, params, seed, unicodeText, unicodeUnit } from './helpers/properties.js';
import { startAccounts, type RunningAccounts } from '../helpers/accounts.js';
import { type RunningIdp, startIdp } from '../helpers/idp.js';
import { idpRequest } from '../helpers/http.js';
import { uniqueIp } from '../helpers/client-ips.js';
import { startAll } from '../helpers/services.js';

let accounts: RunningAccounts;
/** The idp, for the same 72-byte password limit where GoTrue's clients meet it. */
let idp: RunningIdp;
/** Behind the mail routes, so they run their real code (without SMTP_URL they answer 503). */
let smtp: TestSmtp;

const EXISTING = { name: 'Existing User', email: 'existing-hostile@example.com', password: 'existing-password-1' };

before(async () => {
  smtp = await startSmtp();
  [accounts, idp] = await startAll([startAccounts({ env: { SMTP_URL: smtp.url } }), startIdp()]);
  const registered = await accounts.app.inject({ method: 'POST', url: '/auth/register', payload: EXISTING });
  assert.equal(registered.statusCode, 201, registered.body);
});

after(async () => {
  await accounts?.close();
  await idp?.close();
  await smtp?.close();
});

describe('accounts: email, name and password rules', () => {
  const register = (body: unknown) =>
    accounts.app.inject({
      method: 'POST',
      url: '/auth/register',
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
      remoteAddress: uniqueIp(),
    });
  const login = (body: unknown) =>
    accounts.app.inject({
      method: 'POST',
      url: '/auth/login',
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
      remoteAddress: uniqueIp(),
    });

  /** Flips the case of some letters and pads with whitespace: the same address once normalised. */
  const caseAndPadding = (email: string) =>
    fc
      .tuple(
        fc.array(fc.boolean(), { minLength: email.length, maxLength: email.length }),
        fc.constantFrom('', ' ', '\t', '  \n'),
        fc.constantFrom('', ' ', '\t'),
      )
      .map(([flips, a, b]) => a + [...email].map((c, i) => (flips[i] ? c.toUpperCase() : c)).join('') + b);

  const invalidEmail = fc.oneof(
    fc.string({ maxLength: 40 }).filter((s) => !s.includes('@')),
    fc.tuple(fc.emailAddress(), fc.webSegment()).map(([e, x]) => `${e}@${x}`),
    fc.emailAddress().map((e) => e.replace('@', ' @')),
    fc.emailAddress().map((e) => e.replace('@', '@ ')),
    fc
      .tuple(
        unicodeText(8).filter((s) => /[^\x00-\x7f]/.test(s.trim())),
        fc.domain(),
      )
      .map(([l, d]) => `${l}@${d}`),
    fc.constantFrom(
      'user@localhost',
      'user@-example.com',
      'user@example-.com',
      'user@.example.com',
      'user@example..com',
      '@example.com',
      'user@',
      '"quoted local"@example.com',
      'user@[127.0.0.1]',
      `user@${'a'.repeat(64)}.com`,
      `${'a'.repeat(65)}@example.com`,
      `${'a'.repeat(60)}@${Array(4).fill('b'.repeat(60)).join('.')}.com`,
      'user@bücher.de',
      'üser@example.com',
      'user@exa mple.com',
      "x' OR '1'='1",
      'user@example.com\u0000',
    ),
  );

  test('emails: every valid address (any case, padded) is accepted and normalised; invalid ones are a 400 on email', async (t) => {
    fc.assert(
      fc.property(
        fc.emailAddress().chain((e) => fc.tuple(fc.constant(e), caseAndPadding(e))),
        ([email, variant]) => {
          const normalized = normalizeEmail(variant);
          assert.equal(normalized, email.toLowerCase());
          assert.equal(emailProblem(normalized), undefined, `${email} should be valid`);
        },
      ),
      params(3000),
    );
    fc.assert(
      fc.property(invalidEmail, (e) => assert.notEqual(emailProblem(normalizeEmail(e)), undefined, JSON.stringify(e))),
      params(3000),
    );
    // Through the route: a valid email passes to the next check (the too-short password); an invalid one stops at email.
    await fc.assert(
      fc.asyncProperty(fc.emailAddress().chain(caseAndPadding), async (email) => {
        const res = await register({ name: 'Valid Name', email, password: 'short' });
        assert.equal(res.statusCode, 400);
        assert.match(envelopeOf(res.body, 400).message, /^body\/password /, `${JSON.stringify(email)}: ${res.body}`);
      }),
      params(200),
    );
    await fc.assert(
      fc.asyncProperty(invalidEmail, async (email) => {
        for (const res of [
          await register({ name: 'Valid Name', email, password: 'long-enough-1' }),
          await login({ email, password: 'long-enough-1' }),
        ]) {
          assert.equal(res.statusCode, 400, `${JSON.stringify(email)}: ${res.body}`);
          assert.match(envelopeOf(res.body, 400).message, /^body\/email /);
        }
      }),
      params(300),
    );
    reportFigures(t, 'property: accounts emails', { runs: 6500, seed });
  });

  const post = (url: string, body: unknown) =>
    accounts.app.inject({
      method: 'POST',
      url,
      payload: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
      remoteAddress: uniqueIp(),
    });

  test('mail requests: the reset and the resend take any valid address (202, the same for all) and refuse an invalid one on email', async (t) => {
    await fc.assert(
      fc.asyncProperty(
        fc.emailAddress().chain(caseAndPadding),
        fc.constantFrom('/auth/password-reset', '/auth/verify-email/resend'),
        async (email, url) => {
          const res = await post(url, { email });
          assert.equal(res.statusCode, 202, `${url} ${JSON.stringify(email)}: ${res.body}`);
        },
      ),
      params(200),
    );
    await fc.assert(
      fc.asyncProperty(invalidEmail, fc.constantFrom('/auth/password-reset', '/auth/verify-email/resend'), async (email, url) => {
        const res = await post(url, { email });
        assert.equal(res.statusCode, 400, `${url} ${JSON.stringify(email)}: ${res.body}`);
        assert.match(envelopeOf(res.body, 400).message, /^body\/email /);
      }),
      params(300),
    );
    reportFigures(t, 'property: accounts mail request emails', { runs: 500, seed });
  });

  test('mailed tokens: any text that was not issued is the same 400, over 256 characters a 400 on token, a bad new password a 400 on it', async (t) => {
    const tokens = fc.oneof(
      { weight: 4, arbitrary: fc.string({ maxLength: 60 }) },
      { weight: 2, arbitrary: fc.base64String({ minLength: 40, maxLength: 48 }) },
      { weight: 1, arbitrary: fc.string({ minLength: 250, maxLength: 300 }) },
    );
    await fc.assert(
      fc.asyncProperty(tokens, fc.oneof(fc.string(), fc.constant('a valid new password')), fc.boolean(), async (token, password, reset) => {
        const res = reset
          ? await post('/auth/password-reset/confirm', { token, new_password: password })
          : await post('/auth/verify-email', { token });
        assert.equal(res.statusCode, 400, `${JSON.stringify(token)}: ${res.body}`);
        const { message } = envelopeOf(res.body, 400);
        // The schema first, then the new password's rules (no lookup for a password that cannot be
        // set), then the token: a made-up one is the one answer for used, expired and unknown.
        if ([...token].length > 256) assert.match(message, /^body\/token /);
        else if (reset && passwordProblem(password) !== undefined) assert.match(message, /^body\/new_password /, JSON.stringify(password));
        else assert.equal(message, INVALID_EMAIL_TOKEN, JSON.stringify(token));
      }),
      params(400),
    );
    reportFigures(t, 'property: accounts mailed tokens', { runs: 400, seed });
  });

  test('emails are stored lowercased and unique in any case: a case variant of a taken address is a duplicate', async (t) => {
    // Real registrations (cost-12 bcrypt each): a few.
    await fc.assert(
      fc.asyncProperty(
        fc.emailAddress().chain((e) => fc.tuple(caseAndPadding(e), caseAndPadding(e))),
        async ([first, second]) => {
          const res = await register({ name: 'Case Test', email: first, password: 'case-test-pw-1' });
          assert.equal(res.statusCode, 201, res.body);
          assert.equal((res.json() as { data: { email: string } }).data.email, normalizeEmail(first));
          const again = await register({ name: 'Case Test', email: second, password: 'case-test-pw-1' });
          assert.equal(envelopeOf(again.body, 400).message, 'An account with this email already exists');
        },
      ),
      params(3),
    );
    // The duplicate check needs no hashing: many variants of the existing address.
    await fc.assert(
      fc.asyncProperty(caseAndPadding(EXISTING.email), async (email) => {
        const res = await register({ name: 'Another', email, password: 'another-pw-1' });
        assert.equal(envelopeOf(res.body, 400).message, 'An account with this email already exists', JSON.stringify(email));
      }),
      params(150),
    );
    reportFigures(t, 'property: accounts email lowercased + unique', { registrations: 3, variants: 150, seed });
  });

  /** The rule as an oracle: 2-60 code points after trim, valid Unicode, no control characters. */
  const nameValid = (raw: string) => {
    const name = raw.trim();
    return !LONE_SURROGATE.test(name) && !/\p{Cc}/u.test(name) && characterCount(name) >= 2 && characterCount(name) <= 60;
  };

  test('names: 2-60 code points after trim (emoji, combining marks, ZWJ sequences), no control characters', async (t) => {
    const names = fc.oneof(
      unicodeText(70),
      fc.string({ unit: 'grapheme', maxLength: 65 }),
      fc.string({ unit: unicodeUnit, minLength: 55, maxLength: 64 }),
    );
    fc.assert(
      fc.property(names, (raw) => assert.equal(nameProblem(raw.trim()) === undefined, nameValid(raw), JSON.stringify(raw))),
      params(5000),
    );
    // Route: a valid name gets as far as the duplicate check (no hashing); an invalid one stops at name.
    await fc.assert(
      fc.asyncProperty(names, async (name) => {
        const res = await register({ name, email: EXISTING.email, password: 'valid-password-1' });
        const { message } = envelopeOf(res.body, 400);
        if (nameValid(name)) assert.equal(message, 'An account with this email already exists', JSON.stringify(name));
        else assert.match(message, /^body\/name /, JSON.stringify(name));
      }),
      params(300),
    );
    for (const [name, ok] of [
      ['Zoë', true],
      ['e\u0301', true],
      ['👩\u200d👩\u200d👧', true],
      ['😀', false],
      ['  a  ', false],
      ['a'.repeat(60), true],
      ['😀'.repeat(60), true],
      ['😀'.repeat(61), false],
      ['ab\u0000c', false],
      ['line\nbreak', false],
    ] as const) {
      assert.equal(nameProblem(name.trim()) === undefined, ok, JSON.stringify(name));
    }
    reportFigures(t, 'property: accounts names', { runs: 5300, seed });
  });

  /** 8-72 code points, at most 72 UTF-8 bytes, valid Unicode; never trimmed. */
  const passwordValid = (p: string) => !LONE_SURROGATE.test(p) && characterCount(p) >= 8 && characterCount(p) <= 72 && byteLength(p) <= 72;

  test('passwords: 8-72 characters and at most 72 UTF-8 bytes, the byte boundary exact with multibyte characters', async (t) => {
    const passwords = fc.oneof(unicodeText(80), fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀'), minLength: 15, maxLength: 40 }));
    fc.assert(
      fc.property(passwords, (p) => assert.equal(passwordProblem(p) === undefined, passwordValid(p), JSON.stringify(p))),
      params(5000),
    );
    await fc.assert(
      fc.asyncProperty(passwords, async (password) => {
        const res = await register({ name: 'Valid Name', email: EXISTING.email, password });
        const { message } = envelopeOf(res.body, 400);
        if (passwordValid(password)) assert.equal(message, 'An account with this email already exists');
        else assert.match(message, /^body\/password /, JSON.stringify(password));
      }),
      params(300),
    );
    for (const [password, ok] of [
      ['€'.repeat(24), true], // 24 characters, 72 bytes
      [`${'€'.repeat(24)}a`, false], // 73 bytes
      ['😀'.repeat(18), true], // 18 characters, 72 bytes
      [`${'😀'.repeat(18)}a`, false],
      ['é'.repeat(36), true],
      [`${'é'.repeat(36)}a`, false],
      ['a'.repeat(72), true],
      ['a'.repeat(73), false],
      ['a'.repeat(7), false],
      [' '.repeat(8), true], // never trimmed
    ] as const) {
      assert.equal(passwordProblem(password) === undefined, ok, `${password.length} units, ${byteLength(password)} bytes`);
      const res = await register({ name: 'Valid Name', email: EXISTING.email, password });
      assert.equal(/^body\/password /.test(envelopeOf(res.body, 400).message), !ok);
    }
    reportFigures(t, 'property: accounts passwords', { runs: 5300, seed });
  });

  test('never truncation: a password sharing the first 72 bytes of a real one never logs in (accounts and idp)', async (t) => {
    const p72 = `${'€'.repeat(23)}xyz`; // 72 bytes
    assert.equal(byteLength(p72), 72);
    const email = 'truncation-hostile@example.com';
    assert.equal((await register({ name: 'Trunc', email, password: p72 })).statusCode, 201);
    await fc.assert(
      fc.asyncProperty(
        unicodeText(20).filter((s) => s.length > 0),
        async (suffix) => {
          const res = await login({ email, password: p72 + suffix });
          assert.equal(res.statusCode, 400, 'a password over 72 bytes must be refused before bcrypt, not truncated');
          // And it cannot be registered either (so no second account relies on truncation).
          assert.equal((await register({ name: 'Trunc', email: 'other-trunc@example.com', password: p72 + suffix })).statusCode, 400);
        },
      ),
      params(100),
    );
    assert.equal((await login({ email, password: p72 })).statusCode, 200);
    assert.equal((await login({ email, password: p72.slice(0, -1) })).statusCode, 401);

    // The idp: same 72-byte limit (GoTrue's), refused at sign-up, never matched at sign-in.
    const idpEmail = 'truncation-idp@example.com';
    const signup = await idpRequest(idp, 'POST', '/auth/v1/signup', { body: { email: idpEmail, password: p72 } });
    assert.equal(signup.status, 200, signup.text);
    await fc.assert(
      fc.asyncProperty(
        unicodeText(10).filter((s) => s.length > 0),
        async (suffix) => {
          const longer = await idpRequest(idp, 'POST', '/auth/v1/signup', {
            body: { email: 'x-trunc@example.com', password: p72 + suffix },
          });
          assert.equal(longer.status, 400, longer.text);
          const signin = await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', {
            body: { email: idpEmail, password: p72 + suffix },
          });
          assert.equal(signin.status, 400, signin.text);
          assert.equal(signin.body.code, 'invalid_credentials');
        },
      ),
      params(15),
    );
    assert.equal(
      (await idpRequest(idp, 'POST', '/auth/v1/token?grant_type=password', { body: { email: idpEmail, password: p72 } })).status,
      200,
    );
    reportFigures(t, 'property: no password truncation', { accountsRuns: 100, idpRuns: 15, seed });
  });
});
