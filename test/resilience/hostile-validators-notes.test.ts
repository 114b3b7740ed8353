// Property-based tests (fast-check) of every input rule, through the real validation path: the
// exported validators where they exist, and always the HTTP route too (app.inject for the
// shortener and accounts, real HTTP for notes and the idp), so schema and code are covered
// together. The seed is printed; FUZZ_SEED=<seed> replays a failing run.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { characterCount } from '../../src/accounts/validation.js';
import { reportFigures } from './helpers/figures.js';
import { LONE_SURROGATE, params, seed, unicodeText } from './helpers/properties.js';
import { type RunningIdp, startIdp } from '../helpers/idp.js';
import { type RunningNotes, startNotes } from '../helpers/notes.js';
import { request } from '../helpers/http.js';
import { EMAIL_INVALID } from '../../src/notes/identity.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

let idp: RunningIdp;
let notes: RunningNotes;
/** Requests notes sent to the idp's REST API (the note store). */
let storeCalls = 0;
let notesToken = '';
/** Behind the idp, so the password-reset route runs through to a real recovery mail. */
let smtp: TestSmtp;

before(async () => {
  smtp = await startSmtp();
  idp = await startIdp({ env: { SMTP_URL: smtp.url } });
  const countingFetch: typeof fetch = (input, init) => {
    if (String(input instanceof Request ? input.url : input).includes('/rest/v1/')) storeCalls += 1;
    return fetch(input, init);
  };
  notes = await startNotes({ idp, env: { IDP_VERIFY: 'remote' }, deps: { fetch: countingFetch } });
  const email = 'notes-hostile@example.com';
  assert.equal((await request(notes.url, 'POST', '/auth/register', { body: { email, password: 'notes-password-1' } })).status, 201);
  const login = await request(notes.url, 'POST', '/auth/login', { body: { email, password: 'notes-password-1' } });
  assert.equal(login.status, 200, login.text);
  notesToken = login.body.access_token;
});

after(async () => {
  await notes?.close();
  await idp?.close();
  await smtp?.close();
});

describe('notes: titles, bodies and note ids', () => {
  const titleValid = (t: string) => t.length > 0 && characterCount(t) <= 200 && !t.includes('\u0000') && !LONE_SURROGATE.test(t);

  test('titles: 1-200 characters of any text are stored exactly; empty, longer or unstorable ones are a 400', async (t) => {
    const titles = fc.oneof(
      { weight: 4, arbitrary: unicodeText(60) },
      { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('a', '😀', 'é'), minLength: 195, maxLength: 205 }) },
      { weight: 1, arbitrary: fc.constantFrom('', ' ', '\u0000', "'; DROP TABLE notes; --", '<script>alert(1)</script>') },
    );
    let created = 0;
    await fc.assert(
      fc.asyncProperty(titles, async (title) => {
        // JSON escapes keep lone surrogates intact on the wire (fetch would replace them).
        const raw = JSON.stringify({ title }).replace(/[\ud800-\udfff]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
        const res = await request(notes.url, 'POST', '/notes', { raw, token: notesToken });
        if (titleValid(title)) {
          assert.equal(res.status, 201, `${JSON.stringify(title)}: ${res.text}`);
          assert.equal(res.body.title, title);
          created += 1;
        } else {
          assert.equal(res.status, 400, `${JSON.stringify(title)}: ${res.text}`);
          assert.deepEqual(Object.keys(res.body), ['message']);
        }
      }),
      params(80),
    );
    const body = await request(notes.url, 'POST', '/notes', { body: { title: 'long body', body: 'b'.repeat(10_001) }, token: notesToken });
    assert.equal(body.status, 400);
    assert.equal(
      (await request(notes.url, 'POST', '/notes', { body: { title: 'max body', body: '😀'.repeat(10_000) }, token: notesToken })).status,
      201,
    );
    const list = await request(notes.url, 'GET', '/notes', { token: notesToken });
    assert.equal(list.body.length, created + 1);
    reportFigures(t, 'property: notes titles', { runs: 80, created, seed });
  });

  test('note ids: anything but a bigint in decimal is a 404 "Note not found" without a store request', async (t) => {
    const ids = fc
      .oneof(
        fc.string({ unit: 'binary', maxLength: 40 }),
        fc.stringMatching(/^-?[0-9]{1,25}$/),
        fc.bigInt({ min: 9_223_372_036_854_775_808n, max: 10n ** 19n - 1n }).map(String),
        fc.constantFrom('1e3', '0x10', '1.0', ' 1', '1 ', '+1', '1;DROP TABLE notes', "1' OR '1'='1", 'NaN', 'Infinity', '１'),
      )
      .filter((s) => !/^[0-9]{1,19}$/.test(s) || BigInt(s) > 9_223_372_036_854_775_807n)
      .filter((s) => s !== '' && !LONE_SURROGATE.test(s));
    let runs = 0;
    await fc.assert(
      fc.asyncProperty(ids, async (id) => {
        runs += 1;
        const before = storeCalls;
        const res = await request(notes.url, 'DELETE', `/notes/${encodeURIComponent(id)}`, { token: notesToken });
        assert.equal(res.status, 404, `${JSON.stringify(id)}: ${res.text}`);
        // `.` and `..` are dot segments: the client resolves them away and another route's 404 answers.
        const dotSegment = id === '.' || id === '..';
        assert.deepEqual(res.body, { message: dotSegment ? res.body.message : 'Note not found' });
        assert.equal(storeCalls, before, `${JSON.stringify(id)} reached the store`);
      }),
      params(150),
    );
    const missing = await request(notes.url, 'DELETE', '/notes/9223372036854775807', { token: notesToken });
    assert.deepEqual([missing.status, missing.body], [404, { message: 'Note not found' }]);
    reportFigures(t, 'property: notes ids', { runs, seed });
  });
});

describe('notes: the password-reset address', () => {
  test('any email value: the same 202, or exactly the 400 "email must be a valid email address"; never anything else', async (t) => {
    const values = fc.oneof(
      { weight: 3, arbitrary: fc.emailAddress() },
      { weight: 2, arbitrary: unicodeText(40).filter((s) => !LONE_SURROGATE.test(s)) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(
          `${'a'.repeat(250)}@example.com`,
          ' user@example.com ',
          'USER@EXAMPLE.COM',
          "x' OR '1'='1@example.com",
          'user@localhost',
        ),
      },
      { weight: 1, arbitrary: fc.constantFrom(null, 0, true, [], {}, ['a@b.co'], { email: 'a@b.co' }) },
    );
    let accepted = 0;
    await fc.assert(
      fc.asyncProperty(values, async (email) => {
        const res = await request(notes.url, 'POST', '/auth/password-reset', { body: { email } });
        const plainlyInvalid = typeof email !== 'string' || !email.includes('@') || email.length > 255;
        if (res.status === 202 && !plainlyInvalid) {
          accepted += 1;
          return;
        }
        assert.deepEqual([res.status, res.body], [400, { message: EMAIL_INVALID }], `${JSON.stringify(email)}: ${res.status} ${res.text}`);
      }),
      params(150),
    );
    const missing = await request(notes.url, 'POST', '/auth/password-reset', { body: {} });
    assert.deepEqual([missing.status, missing.body], [400, { message: EMAIL_INVALID }]);
    assert.ok(accepted > 0, 'no address was accepted: the property checked refusals only');
    reportFigures(t, 'property: notes password-reset emails', { runs: 150, accepted, seed });
  });
});
