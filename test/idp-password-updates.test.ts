// Password updates cost two bcrypt operations each, so they are counted per user and per client
// address before any hashing: one stolen token cannot keep the cores busy.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { uniqueEmail } from './helpers/emails.js';

let idp: RunningIdp;
before(async () => {
  // The defaults of the password update limits (10 per user, 60 per address an hour).
  idp = await startIdp({ env: { IDP_RATE_LIMIT_PASSWORD_UPDATES_PER_IP: '60', TRUST_PROXY: '127.0.0.1' } });
});
after(async () => {
  await idp?.close();
});

const update = (token: string, password: string, from: string) =>
  idpRequest(idp, 'PUT', '/auth/v1/user', { token, body: { password }, headers: { 'x-forwarded-for': from } });

test('100 concurrent password updates with one token: 10 are hashed, 90 get 429', async () => {
  const user = await createUser(idp, uniqueEmail('pw-flood'));
  const answers = await Promise.all(
    Array.from({ length: 100 }, (_, i) => update(user.token, `new-password-${i}-x`, `203.0.113.${(i % 50) + 1}`)),
  );
  const statuses = answers.map((res) => res.status);
  assert.equal(statuses.filter((s) => s === 200).length, 10, statuses.join(','));
  assert.equal(statuses.filter((s) => s === 429).length, 90);
  assert.equal(answers.find((res) => res.status === 429)!.body.code, 'over_request_rate_limit');
});

test('one address: 60 password updates an hour across users', async () => {
  const users = await Promise.all(Array.from({ length: 7 }, (_, i) => createUser(idp, uniqueEmail(`pw-ip-${i}`))));
  let ok = 0;
  let limited = 0;
  for (const [u, user] of users.entries()) {
    for (let i = 0; i < 10; i++) {
      const res = await update(user.token, `another-password-${u}-${i}`, '198.51.100.77');
      if (res.status === 200) ok++;
      else if (res.status === 429) limited++;
    }
  }
  assert.deepEqual([ok, limited], [60, 10]);
});

test('IPv6: the per-address limit holds per /64 and, at 16 times it, per /48', async () => {
  const strict = await startIdp({ env: { IDP_RATE_LIMIT_PASSWORD_UPDATES_PER_IP: '1', TRUST_PROXY: '127.0.0.1' } });
  try {
    const users = await Promise.all(Array.from({ length: 18 }, (_, i) => createUser(strict, uniqueEmail(`pw-v6-${i}`))));
    const site = `2001:db8:${(Date.now() % 0xffff).toString(16)}`;
    const from = (i: number) => `${site}:${i.toString(16)}::1`;
    const put = (i: number, address: string) =>
      idpRequest(strict, 'PUT', '/auth/v1/user', {
        token: users[i]!.token,
        body: { password: `v6-password-${i}-x` },
        headers: { 'x-forwarded-for': address },
      });
    // One update per /64 of one /48: 16 pass, the 17th /64 is refused as the site's 17th.
    const statuses: number[] = [];
    for (let i = 0; i < 17; i++) statuses.push((await put(i, from(i))).status);
    assert.deepEqual(statuses, [...Array(16).fill(200), 429]);
    // Another site is another client.
    assert.equal((await put(17, '2001:db8:ffff:1::1')).status, 200);
  } finally {
    await strict.close();
  }
});
