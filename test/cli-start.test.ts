// `npm start` as a newcomer meets it when it works: one start of the launcher
// (its own process, an embedded PostgreSQL in a fresh DATA_DIR, the four
// services as processes), its banner, where it listens, a second start on
// the same DATA_DIR, and Ctrl-C.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { freePorts } from './helpers/ports.js';
import { type SpawnedProcess, startLauncher } from './helpers/process.js';

const START_BOUND_MS = 180_000;
const SERVICES = ['idp', 'accounts', 'shortener', 'notes'] as const;

const scratch = mkdtempSync(path.join(tmpdir(), 'cli-start-'));
// As root PostgreSQL runs as the `postgres` OS user, which must reach DATA_DIR.
chmodSync(scratch, 0o755);
const dataDir = path.join(scratch, 'data');
const ports: Record<(typeof SERVICES)[number], number> = { idp: 0, accounts: 0, shortener: 0, notes: 0 };
/** The development mailbox's web page. */
let mailboxWeb = '';
let launcher: SpawnedProcess | undefined;
const output = () => launcher!.output();

/** npm start on this file's DATA_DIR, with the given port of each service, then the mailbox's SMTP and web ports. */
const launch = (free: number[]) =>
  startLauncher({
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    MAILDEV_SMTP_PORT: String(free[4]),
    MAILDEV_WEB_PORT: String(free[5]),
    ...Object.fromEntries(SERVICES.map((name, i) => [`${name.toUpperCase()}_PORT`, String(free[i])])),
  });

before(async () => {
  const free = await freePorts(6);
  SERVICES.forEach((name, i) => (ports[name] = free[i]!));
  mailboxWeb = `http://127.0.0.1:${free[5]}`;
  launcher = launch(free);
  const deadline = Date.now() + START_BOUND_MS;
  while (!/Press Ctrl-C to stop\./.test(output())) {
    if (launcher.child.exitCode !== null) throw new Error(`npm start exited with ${launcher.child.exitCode}: ${output()}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up: ${output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
});

after(async () => {
  if (launcher && launcher.child.exitCode === null && launcher.child.signalCode === null) {
    launcher.child.kill('SIGTERM');
    await launcher.exited;
  }
  rmSync(scratch, { recursive: true, force: true });
});

const banner = () => output().slice(output().indexOf('All services are up'));
const secrets = () => JSON.parse(readFileSync(path.join(dataDir, 'secrets.json'), 'utf8')) as Record<string, string>;

test('the banner: every URL (each answers), the publishable key in full, where the secret keys live, and none of them', async () => {
  const text = banner();
  assert.match(text, /^All services are up \(listening on 127\.0\.0\.1; set HOST to change it\):\n/);
  for (const name of SERVICES) {
    const url = `http://127.0.0.1:${ports[name]}`;
    assert.ok(text.includes(`${url}   API documents: ${url}/docs`), `${name}: ${text}`);
    assert.equal((await fetch(`${url}/healthz`)).status, 200, `${name} at ${url}`);
  }
  const keys = secrets();
  assert.match(keys.IDP_PUBLISHABLE_KEY!, /^sb_publishable_/);
  assert.ok(text.includes(`idp publishable key (public by design): ${keys.IDP_PUBLISHABLE_KEY}\n`), text);
  const secretsLine = text.split('\n').find((line) => line.startsWith('Secret keys'));
  assert.ok(secretsLine, text);
  assert.ok(secretsLine.includes(`generated once into ${path.join(dataDir, 'secrets.json')}, mode 0600`), secretsLine);
  for (const name of ['IDP_SECRET_KEY', 'JWT_SECRET', 'SHORTENER_ADMIN_KEY']) {
    assert.ok(secretsLine.includes(name), `${name} is not named: ${secretsLine}`);
    assert.ok(!output().includes(keys[name]!), `${name} itself was printed`);
  }
  assert.match(text, /\nAdmin account: none \(set ADMIN_EMAIL and ADMIN_PASSWORD\)\n/);
});

test('without HOST every service listens on 127.0.0.1 only', async (t) => {
  const outside = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  if (!outside) {
    t.skip('this machine has no non-loopback IPv4 address to try the services on');
    return;
  }
  for (const name of SERVICES) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: outside, port: ports[name] });
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(true));
    });
    assert.ok(refused, `${name} answered on ${outside}:${ports[name]}`);
  }
});

interface MailboxMail {
  subject: string;
  text: string;
  to: Array<{ address: string }>;
}

/** The first mail to `email` in the development mailbox (its web API), waiting up to 15 s for it. */
async function mailboxMailTo(email: string): Promise<MailboxMail> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const list = (await (await fetch(`${mailboxWeb}/api/email`)).json()) as MailboxMail[];
    const mail = list.find((m) => m.to.some((to) => to.address === email));
    if (mail) return mail;
    assert.ok(Date.now() < deadline, 'no mail arrived in the mailbox');
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('a development mailbox: its page in the banner, and a password-reset mail from accounts arrives in it', async () => {
  assert.ok(banner().includes(`\nMail: development mailbox at ${mailboxWeb} (SMTP smtp://127.0.0.1:`), banner());
  const accounts = `http://127.0.0.1:${ports.accounts}`;
  const email = `mailbox-${Date.now()}@example.com`;
  const post = (path: string, body: unknown) =>
    fetch(`${accounts}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  assert.equal((await post('/auth/register', { name: 'Mailbox', email, password: 'a long passphrase' })).status, 201);
  assert.equal((await post('/auth/password-reset', { email })).status, 202);
  const mail = await mailboxMailTo(email);
  assert.equal(mail.subject, 'Reset your password');
  assert.match(mail.text, /http:\/\/localhost:\d+\/reset-password#token=[A-Za-z0-9_-]{43}/);
});

test('a password reset through notes: the idp\'s recovery mail arrives in the mailbox and its link lands on notes\' /reset-password', async () => {
  const notes = `http://127.0.0.1:${ports.notes}`;
  const email = `notes-mailbox-${Date.now()}@example.com`;
  const post = (path: string, body: unknown, token?: string) =>
    fetch(`${notes}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
  assert.equal((await post('/auth/register', { email, password: 'a long passphrase' })).status, 201);
  assert.equal((await post('/auth/password-reset', { email })).status, 202);
  const mail = await mailboxMailTo(email);
  assert.equal(mail.subject, 'Reset Your Password');
  const link = mail.text.split(/\s+/).find((word) => word.startsWith(`http://127.0.0.1:${ports.idp}/auth/v1/verify?token=`));
  assert.ok(link, mail.text);
  const opened = await fetch(link, { redirect: 'manual' });
  assert.equal(opened.status, 303);
  const landing = new URL(opened.headers.get('location')!);
  assert.equal(`${landing.origin}${landing.pathname}`, `${notes}/reset-password`);
  const session = new URLSearchParams(landing.hash.slice(1));
  assert.equal(session.get('type'), 'recovery');
  assert.equal((await post('/auth/password', { password: 'another long passphrase' }, session.get('access_token')!)).status, 204);
  assert.equal((await post('/auth/login', { email, password: 'another long passphrase' })).status, 200);
});

test('a second npm start on the same DATA_DIR: one line saying the database is in use, and the first keeps serving', async () => {
  const second = launch(await freePorts(6));
  const timer = setTimeout(() => second.child.kill('SIGKILL'), 60_000);
  const code = await second.exited;
  clearTimeout(timer);
  const text = second.output();
  assert.equal(code, 1, text);
  const lines = text.trim().split('\n');
  assert.equal(lines.length, 1, text);
  assert.match(lines[0]!, /^npm start: the embedded database in .* is in use by another running process/);
  for (const name of SERVICES) assert.equal((await fetch(`http://127.0.0.1:${ports[name]}/healthz`)).status, 200, name);
});

test('Ctrl-C (SIGINT) stops every service with SIGINT, each logging it, and the launcher exits 0', async () => {
  const before = output().length;
  launcher!.child.kill('SIGINT');
  assert.equal(await launcher!.exited, 0, output().slice(before));
  const draining = output()
    .slice(before)
    .split('\n')
    .filter((line) => line.includes('SIGINT: draining in-flight requests'))
    .map((line) => (JSON.parse(line) as { service: string }).service)
    .sort();
  assert.deepEqual(draining, [...SERVICES].sort(), output().slice(before));
  assert.doesNotMatch(output().slice(before), /SIGTERM/);
});
