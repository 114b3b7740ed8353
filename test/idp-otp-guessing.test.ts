// Guessing a mailed six-digit code: each token allows five tries, whatever addresses they come
// from, and is then voided (its right code and its link fail too); one account allows a few tokens'
// worth of tries per hour; the link's token cannot be derived from the code; a code lives one hour
// by default.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { uniqueEmail } from './helpers/emails.js';
import { serviceClient } from './helpers/supabase.js';

const clock = manualClock(Date.now());
let idp: RunningIdp;

before(async () => {
  // Every request may name its own client address, as an attacker with many addresses would.
  idp = await startIdp({ env: { TRUST_PROXY: '127.0.0.1,::1' }, clock });
});
after(async () => {
  await idp?.close();
});

async function recoveryLink(email: string) {
  const { data, error } = await serviceClient(idp).auth.admin.generateLink({ type: 'recovery', email });
  assert.equal(error, null);
  return data.properties!;
}

let forged = 0;
/** POST /verify with a code, from a new forged address each time. */
function verifyCode(email: string, token: string) {
  forged++;
  const from = `198.51.${Math.floor(forged / 250) % 250}.${(forged % 250) + 1}`;
  return idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: 'recovery', email, token }, headers: { 'x-forwarded-for': from } });
}

const wrong = (code: string, i: number) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0');

describe('mailed codes against guessing', () => {
  test('after five wrong codes from five addresses, the right code and the link are refused', async () => {
    const user = await createUser(idp, uniqueEmail('otp-guess'));
    const link = await recoveryLink(user.email);
    for (let i = 0; i < 5; i++) {
      const res = await verifyCode(user.email, wrong(link.email_otp, i));
      assert.equal(res.status, 403);
      assert.equal(res.body.code, 'otp_expired');
    }
    const right = await verifyCode(user.email, link.email_otp);
    assert.equal(right.status, 403, 'the token is voided');
    assert.equal(right.body.code, 'otp_expired');
    const viaLink = await idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: 'recovery', token_hash: link.hashed_token } });
    assert.equal(viaLink.status, 403, 'the link is voided with it');
    // A new mail gives a new token with its own tries.
    const fresh = await recoveryLink(user.email);
    assert.equal((await verifyCode(user.email, fresh.email_otp)).status, 200);
  });

  test('four wrong codes, then the right one, still sign in', async () => {
    const user = await createUser(idp, uniqueEmail('otp-typo'));
    const link = await recoveryLink(user.email);
    for (let i = 0; i < 4; i++) assert.equal((await verifyCode(user.email, wrong(link.email_otp, i))).status, 403);
    const right = await verifyCode(user.email, link.email_otp);
    assert.equal(right.status, 200);
    assert.ok(right.body.access_token);
  });

  test('200 concurrent guesses from 200 addresses: none of them, nor the right code after, gets in', async () => {
    const user = await createUser(idp, uniqueEmail('otp-flood'));
    const link = await recoveryLink(user.email);
    const guesses = await Promise.all(Array.from({ length: 200 }, (_, i) => verifyCode(user.email, wrong(link.email_otp, i))));
    // The account's fifteen tries an hour are 403s (five of them compared, then the token is void); the rest 429.
    assert.equal(guesses.filter((res) => res.status === 403).length, 15);
    assert.equal(guesses.filter((res) => res.status === 429).length, 185);
    assert.notEqual((await verifyCode(user.email, link.email_otp)).status, 200);
  });

  test('one account allows fifteen tries an hour across its tokens', async () => {
    const user = await createUser(idp, uniqueEmail('otp-account'));
    for (let round = 0; round < 3; round++) {
      const link = await recoveryLink(user.email);
      for (let i = 0; i < 5; i++) assert.equal((await verifyCode(user.email, wrong(link.email_otp, i))).status, 403);
    }
    const link = await recoveryLink(user.email);
    const refused = await verifyCode(user.email, link.email_otp);
    assert.equal(refused.status, 429);
    assert.equal(refused.body.code, 'over_request_rate_limit');
    // The link, which cannot be guessed, still works.
    const viaLink = await idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: 'recovery', token_hash: link.hashed_token } });
    assert.equal(viaLink.status, 200);
    clock.advance(60 * 60_000 + 1000);
    const next = await recoveryLink(user.email);
    assert.equal((await verifyCode(user.email, next.email_otp)).status, 200, 'the next hour counts anew');
  });

  test("the link's token is not the hash of the address and code", async () => {
    const user = await createUser(idp, uniqueEmail('otp-hash'));
    const link = await recoveryLink(user.email);
    const derived = createHash('sha224')
      .update(user.email + link.email_otp)
      .digest('hex');
    assert.notEqual(link.hashed_token, derived);
    const guessed = await idpRequest(idp, 'POST', '/auth/v1/verify', { body: { type: 'recovery', token_hash: derived } });
    assert.equal(guessed.status, 403);
  });

  test('a code lives one hour by default', async () => {
    const user = await createUser(idp, uniqueEmail('otp-life'));
    const link = await recoveryLink(user.email);
    clock.advance(60 * 60_000 + 1000);
    assert.equal((await verifyCode(user.email, link.email_otp)).status, 403);
  });
});
