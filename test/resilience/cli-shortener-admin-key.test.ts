// `npm start` without SHORTENER_ADMIN_KEY generates one into DATA_DIR/secrets.json (mode 0600),
// like its other secrets, hands it to the shortener, shows only its first characters, and keeps
// it across restarts; set in the environment, the variable wins. The launcher runs as users run
// it (its environment only PATH and what the test sets), on its embedded PostgreSQL in a
// directory of its own.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { freePorts } from '../helpers/ports.js';
import { type SpawnedProcess, startLauncher } from '../helpers/process.js';
import { reportFigures } from './helpers/figures.js';

const START_BOUND_MS = 180_000;

const base = mkdtempSync(path.join(tmpdir(), 'svc-cli-admin-key-'));
// As root PostgreSQL runs as the `postgres` OS user, which must reach DATA_DIR.
chmodSync(base, 0o755);
const dataDir = path.join(base, 'data');
let running: SpawnedProcess | undefined;

after(async () => {
  await stop();
  rmSync(base, { recursive: true, force: true });
});

async function stop(): Promise<void> {
  if (!running) return;
  if (running.child.exitCode === null && running.child.signalCode === null) running.child.kill('SIGTERM');
  await running.exited;
  running = undefined;
}

/** Starts `npm start`; resolves with the shortener's URL and everything printed until all services are up. */
async function start(env: Record<string, string> = {}): Promise<{ shortener: string; output: () => string }> {
  const [idp, accounts, shortener, notes, mailSmtp, mailWeb] = await freePorts(6);
  const launcher = startLauncher({
    DATA_DIR: dataDir,
    LOG_LEVEL: 'info',
    IDP_PORT: String(idp),
    ACCOUNTS_PORT: String(accounts),
    SHORTENER_PORT: String(shortener),
    NOTES_PORT: String(notes),
    MAILDEV_SMTP_PORT: String(mailSmtp),
    MAILDEV_WEB_PORT: String(mailWeb),
    ...env,
  });
  running = launcher;
  const deadline = Date.now() + START_BOUND_MS;
  while (!launcher.output().includes('All services are up')) {
    if (launcher.child.exitCode !== null) throw new Error(`npm start exited with ${launcher.child.exitCode}: ${launcher.output()}`);
    if (Date.now() > deadline) throw new Error(`npm start did not come up: ${launcher.output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { shortener: `http://127.0.0.1:${shortener}`, output: launcher.output };
}

async function adminStatus(url: string, key: string): Promise<number> {
  const res = await fetch(`${url}/api/links`, { headers: { authorization: `Bearer ${key}` } });
  await res.arrayBuffer();
  return res.status;
}

const secretsFile = () => path.join(dataDir, 'secrets.json');
const storedKey = () => (JSON.parse(readFileSync(secretsFile(), 'utf8')) as Record<string, string>).SHORTENER_ADMIN_KEY;

test('npm start generates SHORTENER_ADMIN_KEY into secrets.json, the shortener takes it, the output names it without showing any of it, a restart keeps it', async (t) => {
  const first = await start();
  const key = storedKey();
  assert.ok(key && Buffer.byteLength(key) >= 32, `a generated key of at least 32 bytes: ${key?.length}`);
  assert.equal(statSync(secretsFile()).mode & 0o777, 0o600, 'secrets.json is readable by its owner only');
  assert.equal(await adminStatus(first.shortener, key), 200, 'the shortener accepts the generated key');
  assert.equal(await adminStatus(first.shortener, `${key}x`), 401);
  assert.match(
    first.output(),
    /Secret keys \(generated once into .*secrets\.json.*SHORTENER_ADMIN_KEY/,
    'the banner says where the key is',
  );
  assert.ok(!first.output().includes(key.slice(0, 8)), 'no part of the key is printed');
  await stop();

  const second = await start();
  assert.equal(storedKey(), key, 'the key is generated once');
  assert.equal(await adminStatus(second.shortener, key), 200, 'and still accepted after a restart');
  assert.ok(!second.output().includes(key.slice(0, 8)));
  await stop();

  // Set in the environment, the variable is the key (and the stored one is not).
  const own = `own-admin-key-${'z'.repeat(32)}`;
  const third = await start({ SHORTENER_ADMIN_KEY: own });
  assert.equal(await adminStatus(third.shortener, own), 200);
  assert.equal(await adminStatus(third.shortener, key), 401);
  assert.equal(storedKey(), key, 'the stored key is left as it was');
  await stop();
  reportFigures(t, 'npm start: SHORTENER_ADMIN_KEY generated, kept, overridable', { keyBytes: Buffer.byteLength(key), starts: 3 });
});
