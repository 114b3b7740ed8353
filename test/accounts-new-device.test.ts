// The new-device sign-in mail: a sign-in (any method) from a device the account never signed
// in from is audited and mailed, naming the device and the time; the account's first sign-in,
// and later ones from known devices, are not. The login answer stays as it was. Mails reach a
// real SMTP server; the clock is injected.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { deviceOf } from '../src/accounts/new-devices.js';
import { accountsSuite, json, noSecretInAnyResponse, registerUser } from './helpers/accounts.js';
import { uniqueEmail } from './helpers/emails.js';
import { type TestSmtp, startSmtp } from './helpers/smtp.js';
import { SoftAuthenticator } from './helpers/webauthn.js';

const suite = accountsSuite();
const clock = manualClock(Date.UTC(2026, 2, 14, 9, 30, 0));
const PUBLIC_URL = 'https://accounts.example.test';
const PASSWORD = 'correct horse 42';
const CHROME_LINUX = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
const CHROME_LINUX_NEWER = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';
const FIREFOX_WINDOWS = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0';
const SAFARI_IPHONE =
  'Mozilla/5.0 (iPhone; CPU iPhone OS 17_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Mobile/15E148 Safari/604.1';
let app: App;
let smtp: TestSmtp;

before(async () => {
  smtp = await startSmtp();
  app = await suite.app({ SMTP_URL: smtp.url, ACCOUNTS_PUBLIC_URL: PUBLIC_URL }, { clock, mailWorker: { pollIntervalMs: 50 } });
});
after(async () => {
  await smtp.close();
});

const login = (email: string, agent: string, ip = '203.0.113.7') =>
  app.inject({
    method: 'POST',
    url: '/auth/login',
    payload: { email, password: PASSWORD },
    headers: { 'user-agent': agent },
    remoteAddress: ip,
  });
const newDeviceEvents = async (id: string) =>
  (
    await suite.pool.query(`SELECT details FROM audit_log WHERE target_id = $1 AND event = 'new_device_sign_in' ORDER BY id`, [id])
  ).rows.map((r) => r.details.device as string);
/** Mails to `to` received so far whose subject names a new sign-in. */
const newDeviceMails = (to: string) => smtp.received.filter((m) => m.to === to && /New sign-in/.test(m.subject));

/**
 * Waits until the outbox is empty: a mail is queued in the sign-in's transaction, so once the
 * answer came and the outbox drained, any mail of that sign-in has reached the SMTP server.
 */
async function mailSettled(): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { rows } = await suite.pool.query('SELECT count(*)::int AS n FROM mail_outbox WHERE failed_at IS NULL');
    if (rows[0].n === 0) return;
    assert.ok(Date.now() < deadline, 'mail still queued after 20 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('what a device is: the browser and system a user agent names, else the agent as sent, else unknown', () => {
  assert.equal(deviceOf(CHROME_LINUX), 'Chrome on Linux');
  assert.equal(deviceOf(CHROME_LINUX_NEWER), 'Chrome on Linux');
  assert.equal(deviceOf(FIREFOX_WINDOWS), 'Firefox on Windows');
  assert.equal(deviceOf('curl/8.5.0'), 'curl/8.5.0');
  assert.equal(deviceOf(undefined), 'Unknown device');
  assert.equal(deviceOf('   '), 'Unknown device');
});

test('the first sign-in is silent; a known device (a newer version of its browser too) is silent; a new one is audited and mailed with device and time', async () => {
  const user = await registerUser(app, { name: 'Device User', email: uniqueEmail('devices'), password: PASSWORD });
  const first = await login(user.email, CHROME_LINUX);
  assert.equal(first.statusCode, 200, first.body);
  assert.equal((await login(user.email, CHROME_LINUX_NEWER)).statusCode, 200);
  await mailSettled();
  assert.deepEqual(newDeviceMails(user.email), []);
  assert.deepEqual(await newDeviceEvents(user.id), []);

  clock.advance(60_000);
  const fromFirefox = await login(user.email, FIREFOX_WINDOWS);
  assert.equal(fromFirefox.statusCode, 200, fromFirefox.body);
  // The answer is the plain login's: no word of the device.
  assert.deepEqual(Object.keys(fromFirefox.json().data).sort(), Object.keys(first.json().data).sort());
  assert.ok(!fromFirefox.body.includes('Firefox'));
  const mail = await smtp.waitForMail(user.email);
  assert.equal(mail.subject, 'New sign-in from Firefox on Windows');
  assert.match(mail.text, /Firefox on Windows, on 2026-03-14 09:31 UTC, from the address 203\.0\.113\.7/);
  assert.deepEqual(await newDeviceEvents(user.id), ['Firefox on Windows']);

  // Known now: signing in from it again is silent.
  assert.equal((await login(user.email, FIREFOX_WINDOWS, '198.51.100.9')).statusCode, 200);
  await mailSettled();
  assert.equal(newDeviceMails(user.email).length, 1);
  assert.deepEqual(await newDeviceEvents(user.id), ['Firefox on Windows']);
  const known = await suite.pool.query('SELECT device FROM known_devices WHERE user_id = $1 ORDER BY first_seen_at, device', [user.id]);
  assert.deepEqual(
    known.rows.map((r) => r.device),
    ['Chrome on Linux', 'Firefox on Windows'],
  );
});

test('a failed login records no device', async () => {
  const user = await registerUser(app, { name: 'Failed Device', email: uniqueEmail('failed'), password: PASSWORD });
  assert.equal((await login(user.email, CHROME_LINUX)).statusCode, 200);
  const wrong = await app.inject({
    method: 'POST',
    url: '/auth/login',
    payload: { email: user.email, password: 'wrong password 1' },
    headers: { 'user-agent': FIREFOX_WINDOWS },
  });
  assert.equal(wrong.statusCode, 401);
  assert.equal((await suite.pool.query('SELECT 1 FROM known_devices WHERE user_id = $1', [user.id])).rowCount, 1);
  // So the device is still new when the right password comes from it.
  assert.equal((await login(user.email, FIREFOX_WINDOWS)).statusCode, 200);
  assert.equal((await smtp.waitForMail(user.email)).subject, 'New sign-in from Firefox on Windows');
});

test('any method counts: a sign-in with a passkey from a new device is mailed too; a refresh is no sign-in', async () => {
  const user = await registerUser(app, { name: 'Passkey Device', email: uniqueEmail('passkey-device'), password: PASSWORD });
  const pair = (await login(user.email, CHROME_LINUX)).json().data;
  const authenticator = new SoftAuthenticator(PUBLIC_URL);
  const options = (
    await json(app, 'POST', '/auth/passkeys/registration-options', undefined, { authorization: `Bearer ${pair.token}` })
  ).json().data;
  const added = await json(
    app,
    'POST',
    '/auth/passkeys',
    { name: 'Phone', response: authenticator.create(options).json },
    { authorization: `Bearer ${pair.token}` },
  );
  assert.equal(added.statusCode, 201, added.body);
  assert.match((await smtp.waitForMail(user.email)).subject, /A passkey was added/);

  // A refresh from another agent starts no session: nothing.
  const refreshed = await app.inject({
    method: 'POST',
    url: '/auth/refresh',
    payload: { refresh_token: pair.refresh_token },
    headers: { 'user-agent': FIREFOX_WINDOWS },
  });
  assert.equal(refreshed.statusCode, 200, refreshed.body);
  await mailSettled();
  assert.deepEqual(newDeviceMails(user.email), []);

  const signInOptions = (await json(app, 'POST', '/auth/passkeys/sign-in/options')).json().data;
  const signedIn = await app.inject({
    method: 'POST',
    url: '/auth/passkeys/sign-in',
    payload: { response: authenticator.get(signInOptions) },
    headers: { 'user-agent': SAFARI_IPHONE },
  });
  assert.equal(signedIn.statusCode, 200, signedIn.body);
  const mail = await smtp.waitForMail(user.email);
  assert.equal(mail.subject, 'New sign-in from Mobile Safari on iOS');
  assert.deepEqual(await newDeviceEvents(user.id), ['Mobile Safari on iOS']);
});

test('a client naming no browser is its user agent; two different scripts are two devices', async () => {
  const user = await registerUser(app, { name: 'Script User', email: uniqueEmail('scripts'), password: PASSWORD });
  assert.equal((await login(user.email, 'curl/8.5.0')).statusCode, 200);
  assert.equal((await login(user.email, 'curl/8.5.0')).statusCode, 200);
  assert.equal((await login(user.email, 'python-requests/2.31')).statusCode, 200);
  assert.equal((await smtp.waitForMail(user.email)).subject, 'New sign-in from python-requests/2.31');
  assert.deepEqual(await newDeviceEvents(user.id), ['python-requests/2.31']);
});

noSecretInAnyResponse();
