// With IDP_FORWARDED_SECRET (npm start sets it for the idp and notes), X-Forwarded-For from a
// trusted address is believed only with the secret: another local process forging addresses is
// limited as the one client it is.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type RunningIdp, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';

const SECRET = 'forwarded-secret-for-tests-0123456789';
let idp: RunningIdp;
before(async () => {
  idp = await startIdp({ env: { TRUST_PROXY: '127.0.0.1,::1', IDP_FORWARDED_SECRET: SECRET, IDP_RATE_LIMIT_VERIFY: '30' } });
});
after(async () => {
  await idp?.close();
});

const verify = (i: number, headers: Record<string, string>) =>
  idpRequest(idp, 'POST', '/auth/v1/verify', {
    body: { type: 'recovery', token_hash: 'f'.repeat(56) },
    headers: { 'x-forwarded-for': `203.0.${Math.floor(i / 250)}.${(i % 250) + 1}`, ...headers },
  });

test('200 forged X-Forwarded-For without the secret are limited as one client', async () => {
  const statuses: number[] = [];
  for (let i = 0; i < 200; i++) statuses.push((await verify(i, {})).status);
  assert.equal(statuses.filter((s) => s === 403).length, 30);
  assert.equal(statuses.filter((s) => s === 429).length, 170);
  const wrongSecret = await verify(500, { 'x-forwarded-secret': `${SECRET}x` });
  assert.equal(wrongSecret.status, 429, 'a wrong secret is no secret');
});

test('with the secret, each forwarded address is its own client', async () => {
  for (let i = 1000; i < 1040; i++) assert.equal((await verify(i, { 'x-forwarded-secret': SECRET })).status, 403);
});
