// `npm start` as a newcomer meets it when it works: one start of the launcher
// (its own process, an embedded PostgreSQL in a fresh DATA_DIR, the four
// services as processes), its banner, where it listens, a second start on
// the same DATA_DIR, and Ctrl-C.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import http from 'node:http';
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
/** What the start had printed when its banner appeared. */
let startOutput = '';

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
  for (const [i, name] of SERVICES.entries()) ports[name] = free[i]!;
  mailboxWeb = `http://127.0.0.1:${free[5]}`;
  launcher = launch(free);
  const deadline = Date.now() + START_BOUND_MS;
  while (!/Press Ctrl-C to stop\./.test(output())) {
    if (launcher.child.exitCode !== null) throw new Error(`npm start exited with ${launcher.child.exitCode}: ${output()}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up: ${output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  startOutput = output();
});

after(async () => {
  if (launcher && launcher.child.exitCode === null && launcher.child.signalCode === null) {
    launcher.child.kill('SIGTERM');
    await launcher.exited;
  }
  // Whatever still runs of this start's database (a failed test may leave it) goes too.
  const pidFile = path.join(dataDir, 'pg', 'postmaster.pid');
  const postmaster = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').split('\n')[0]) : 0;
  if (postmaster > 0) {
    try {
      process.kill(postmaster, 'SIGTERM');
    } catch {
      // gone already
    }
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

test('the start prints readable lines, no health probe, and the banner after every service has said it listens', () => {
  const [beforeBanner = '', afterBanner = ''] = startOutput.split('All services are up');
  assert.doesNotMatch(startOutput, /^\{"level"/m, 'a JSON log line reached the terminal');
  assert.doesNotMatch(startOutput, /\/healthz|\/readyz/, 'a health probe was logged');
  for (const name of SERVICES) assert.match(beforeBanner, new RegExp(`^\\[[\\d:.]+\\] INFO: ${name}: ${name} listening on `, 'm'), name);
  assert.doesNotMatch(afterBanner, / listening on http/);
  assert.match(afterBanner, /\nLogs: readable lines \(LOG_FORMAT=json for the JSON the services write\); health probes are not shown\n/);
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
  html?: string;
  from: Array<{ address: string; name: string }>;
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
  assert.match(mail.text, new RegExp(`http://127\\.0\\.0\\.1:${ports.accounts}/reset-password#token=[A-Za-z0-9_-]{43}`));
});

test('the mailbox lets no other web page read it, and keeps its files to the user: 0600 in 0700 folders', async () => {
  // A page of another origin: refused, preflight too, and no CORS header that would let a browser read the answer.
  for (const [method, headers] of [
    ['GET', { origin: 'http://evil.example' }],
    ['GET', { origin: 'null' }],
    ['OPTIONS', { origin: 'http://evil.example', 'access-control-request-method': 'GET' }],
    // DNS rebinding: another name for 127.0.0.1, so the browser sends no Origin but that Host.
    ['GET', { host: `evil.example:${new URL(mailboxWeb).port}` }],
  ] as const) {
    const res = await rawGet(`${mailboxWeb}/api/email`, method, headers);
    assert.equal(res.status, 403, `${method} ${JSON.stringify(headers)}`);
    assert.equal(res.headers['access-control-allow-origin'], undefined);
  }
  // Its own page, opened by its address (127.0.0.1 or localhost): read, with no CORS header either.
  const own = await rawGet(`${mailboxWeb}/api/email`, 'GET', { origin: mailboxWeb });
  assert.equal(own.status, 200);
  assert.equal(own.headers['access-control-allow-origin'], undefined);
  assert.equal((await fetch(`${mailboxWeb}/`, { headers: { accept: 'text/html' } })).status, 200);
  // Its storage: the mail of the test before is there, private.
  const open: string[] = [];
  let files = 0;
  const walk = (dir: string) => {
    if ((statSync(dir).mode & 0o777) !== 0o700) open.push(`${dir} ${(statSync(dir).mode & 0o777).toString(8)}`);
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else {
        files++;
        if ((statSync(full).mode & 0o777) !== 0o600) open.push(`${full} ${(statSync(full).mode & 0o777).toString(8)}`);
      }
    }
  };
  walk(path.join(dataDir, 'maildev'));
  assert.ok(files >= 1, 'no mail stored');
  assert.deepEqual(open, [], 'folders not 0700 or files not 0600');
});

/** A request with exactly these headers (fetch would set Origin and Host itself). */
function rawGet(
  url: string,
  method: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    request.on('error', reject);
    request.end();
  });
}

test("notes' recovery mail comes from Notes and links to notes' own page, which spends the token only on its button; no code", async () => {
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
  assert.equal(mail.subject, 'Reset your Notes password');
  assert.equal(mail.from[0]?.name, 'Notes');
  const link = new RegExp(`http://127\\.0\\.0\\.1:${ports.notes}/reset-password\\?token_hash=[0-9a-f]{56}&type=recovery`).exec(
    mail.text,
  )?.[0];
  assert.ok(link, mail.text);
  assert.doesNotMatch(mail.text, /code/i);
  assert.match(mail.html ?? '', /target="_blank" rel="noopener"/);
  // Opened (as a scanner would), the page answers and the token is still good.
  assert.equal((await fetch(link)).status, 200);
  const tokenHash = new URL(link).searchParams.get('token_hash');
  const verified = await post('/auth/verify', { token_hash: tokenHash, type: 'recovery' });
  assert.equal(verified.status, 200);
  const { access_token } = (await verified.json()) as { access_token: string };
  assert.equal((await post('/auth/password', { password: 'another long passphrase' }, access_token)).status, 204);
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

test("Ctrl-C in the terminal (SIGINT to the launcher's whole group) stops every service, then the database, and exits 0", async () => {
  // The database runs in a process group of its own: the terminal's signal never reaches it.
  const postmaster = Number(readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const groupOf = (pid: number) => Number(execFileSync('ps', ['-o', 'pgid=', '-p', String(pid)], { encoding: 'utf8' }).trim());
  assert.notEqual(groupOf(postmaster), launcher!.child.pid, 'PostgreSQL is in the group the terminal signals');
  const before = output().length;
  process.kill(-launcher!.child.pid!, 'SIGINT');
  assert.equal(await launcher!.exited, 0, output().slice(before));
  const lines = output().slice(before).split('\n');
  const draining = lines.map((line) => /INFO: (\w+): SIGINT: draining in-flight requests$/.exec(line)?.[1]).filter(Boolean);
  assert.deepEqual(draining.sort(), [...SERVICES].sort(), output().slice(before));
  // The database stopped last: after every service said it had stopped, and none lost its connection before.
  const stopped = lines.map((line, i) => (/INFO: \w+: stopped$/.test(line) ? i : -1)).filter((i) => i >= 0);
  const databaseStopped = lines.findIndex((line) => line.includes('database stopped: every service had stopped before it'));
  assert.equal(stopped.length, SERVICES.length, output().slice(before));
  assert.ok(databaseStopped > Math.max(...stopped), output().slice(before));
  assert.doesNotMatch(output().slice(before), /57P0[13]|not drained|terminating connection|SIGTERM/);
});
