// The idp remembers the access tokens whose signature it verified, so a client's later requests
// skip the P-256 verification: bounded, only tokens that verified, time claims checked every time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ACCESS_TOKEN_AUDIENCE, SigningKeys, VERIFIED_TOKENS_REMEMBERED } from '../src/idp/keys.js';
import { manualClock } from '../src/kit/clock.js';
import { TEST_SIGNING_KEY } from './helpers/idp.js';

const clock = manualClock(Date.UTC(2026, 0, 1));
const now = () => Math.floor(clock() / 1000);
const claims = (n: number) => ({
  iss: 'http://127.0.0.1/auth/v1',
  sub: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
  aud: ACCESS_TOKEN_AUDIENCE,
  exp: now() + 3600,
  iat: now(),
  email: `user-${n}@example.com`,
  phone: '',
  app_metadata: {},
  user_metadata: {},
  role: 'authenticated',
  aal: 'aal1',
  amr: [{ method: 'password', timestamp: now() }],
  session_id: '00000000-0000-4000-8000-000000000002',
  is_anonymous: false,
});

test('a verified token is remembered; its expiry is still checked on every use', async () => {
  const keys = await SigningKeys.fromPrivateKey(TEST_SIGNING_KEY, clock);
  const token = await keys.sign(claims(1));
  assert.equal((await keys.verify(token)).ok, true);
  assert.equal(keys.rememberedTokens, 1);
  const start = clock();
  try {
    clock.set(start + 3600_000);
    assert.deepEqual(await keys.verify(token), { ok: false, problem: { kind: 'expired' } });
  } finally {
    clock.set(start);
  }
  // Callers get a copy: changing it does not change what is remembered.
  const first = await keys.verify(token);
  assert.ok(first.ok);
  first.claims.sub = 'someone else';
  const again = await keys.verify(token);
  assert.ok(again.ok);
  assert.equal(again.claims.sub, claims(1).sub);
});

test('tokens that fail are never remembered: a forged signature, the high-s twin, a foreign header', async () => {
  const keys = await SigningKeys.fromPrivateKey(TEST_SIGNING_KEY, clock);
  const token = await keys.sign(claims(2));
  const [header, payload, signature] = token.split('.') as [string, string, string];
  const flipped = `${header}.${payload}.${signature[0] === 'A' ? 'B' : 'A'}${signature.slice(1)}`;
  const otherPayload = `${header}.${Buffer.from(JSON.stringify({ ...claims(3) })).toString('base64url')}.${signature}`;
  for (const forged of [flipped, otherPayload, `${header}.${payload}.`]) {
    assert.equal((await keys.verify(forged)).ok, false);
    assert.equal((await keys.verify(forged)).ok, false);
  }
  assert.equal(keys.rememberedTokens, 0);
});

test(`at most ${VERIFIED_TOKENS_REMEMBERED} tokens are remembered, the oldest dropped first, and a dropped one is verified again`, async () => {
  const keys = await SigningKeys.fromPrivateKey(TEST_SIGNING_KEY, clock);
  const tokens = await Promise.all(Array.from({ length: VERIFIED_TOKENS_REMEMBERED + 10 }, (_, i) => keys.sign(claims(i))));
  for (const token of tokens) assert.equal((await keys.verify(token)).ok, true);
  assert.equal(keys.rememberedTokens, VERIFIED_TOKENS_REMEMBERED);
  const oldest = await keys.verify(tokens[0]!);
  assert.ok(oldest.ok);
  assert.equal(oldest.claims.sub, claims(0).sub);
  assert.equal(keys.rememberedTokens, VERIFIED_TOKENS_REMEMBERED);
});
