// The service's hourly mail quota (IDP_RATE_LIMIT_EMAIL_SENT, 30 by default) is charged only for
// mail that is sent: recovery requests for made-up addresses cannot spend it and lock every real
// user out of recovery. Unknown and known addresses get the same answer, spent quota or not.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createUser, type RunningIdp, startIdp } from './helpers/idp.js';
import { idpRequest } from './helpers/http.js';
import { uniqueEmail } from './helpers/emails.js';
import { startSmtp, type TestSmtp } from './helpers/smtp.js';

let smtp: TestSmtp;
let idp: RunningIdp;
let small: RunningIdp;

before(async () => {
  smtp = await startSmtp();
  [idp, small] = await Promise.all([
    // The default quota (30 an hour), as the attack met it.
    startIdp({ env: { SMTP_URL: smtp.url, IDP_RATE_LIMIT_EMAIL_SENT: '30' } }),
    startIdp({ env: { SMTP_URL: smtp.url, IDP_RATE_LIMIT_EMAIL_SENT: '2' } }),
  ]);
});
after(async () => {
  await Promise.all([idp?.close(), small?.close()]);
  await smtp?.close();
});

const recover = (target: RunningIdp, email: string) => idpRequest(target, 'POST', '/auth/v1/recover', { body: { email } });

describe('mail quota', () => {
  test("40 recoveries for made-up addresses do not stop a real user's recovery mail", async () => {
    const user = await createUser(idp, uniqueEmail('quota-real'));
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => recover(idp, uniqueEmail(`quota-fake-${i}`))));
    for (const res of answers) assert.deepEqual([res.status, res.body], [200, {}]);
    const real = await recover(idp, user.email);
    assert.deepEqual([real.status, real.body], [200, {}]);
    const mail = await smtp.waitForMail(user.email);
    assert.match(mail.text, /verify\?token=/);
  });

  test('with the quota spent, a known address is answered exactly as an unknown one, and no mail goes', async () => {
    const users = await Promise.all([1, 2, 3].map((i) => createUser(small, uniqueEmail(`quota-spend-${i}`))));
    for (const user of users.slice(0, 2)) {
      assert.equal((await recover(small, user.email)).status, 200);
      await smtp.waitForMail(user.email);
    }
    const known = await recover(small, users[2]!.email);
    const unknown = await recover(small, uniqueEmail('quota-nobody'));
    assert.deepEqual([known.status, known.body, known.text], [unknown.status, unknown.body, unknown.text]);
    assert.deepEqual([known.status, known.body], [200, {}]);
    await assert.rejects(smtp.waitForMail(users[2]!.email, { timeout: 1000 }), 'past the quota the mail is dropped');
  });

  test('the per-recipient limit answers known and unknown addresses alike', async () => {
    const user = await createUser(idp, uniqueEmail('quota-twice'));
    const nobody = uniqueEmail('quota-twice-nobody');
    for (const email of [user.email, nobody]) assert.equal((await recover(idp, email)).status, 200);
    const [a, b] = [await recover(idp, user.email), await recover(idp, nobody)];
    assert.deepEqual([a.status, a.body.code], [429, 'over_email_send_rate_limit']);
    assert.deepEqual([b.status, b.body], [a.status, a.body]);
  });
});
