import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { startEmbeddedPostgres } from '../src/dev/embedded-postgres.js';
import { closedPort, freePorts } from './helpers/ports.js';
import { startLauncher } from './helpers/process.js';

// `npm start` as a newcomer meets it: what stops a start is one line that says
// what is wrong and how to get past it, never a stack trace, and a start that
// cannot work leaves nothing behind.

const scratch = mkdtempSync(path.join(tmpdir(), 'cli-start-'));
chmodSync(scratch, 0o755);
after(() => rmSync(scratch, { recursive: true, force: true }));

/** A start expected to stop by itself: its exit code and everything it printed. */
async function launcher(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const ports = await freePorts(6);
  const started = startLauncher({
    LOG_LEVEL: 'warn',
    ACCOUNTS_PORT: String(ports[0]),
    SHORTENER_PORT: String(ports[1]),
    NOTES_PORT: String(ports[2]),
    IDP_PORT: String(ports[3]),
    MAILDEV_SMTP_PORT: String(ports[4]),
    MAILDEV_WEB_PORT: String(ports[5]),
    ...env,
  });
  const timer = setTimeout(() => started.child.kill('SIGKILL'), 60_000);
  const code = await started.exited;
  clearTimeout(timer);
  return { code, output: started.output() };
}

function assertOneLine(output: string, pattern: RegExp): void {
  const lines = output.trim().split('\n');
  assert.equal(lines.length, 1, output);
  assert.match(lines[0]!, pattern);
  assert.doesNotMatch(output, /\n\s+at /, 'no stack trace');
}

test('a port in use: one line naming the variable that moves it, and nothing written', async () => {
  const busy = net.createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const port = (busy.address() as net.AddressInfo).port;
  const dataDir = path.join(scratch, 'port-in-use');
  try {
    const { code, output } = await launcher({ DATA_DIR: dataDir, SHORTENER_PORT: String(port) });
    assert.equal(code, 1);
    assertOneLine(output, new RegExp(`^npm start: port ${port} is already in use on 127\\.0\\.0\\.1; set SHORTENER_PORT to another port$`));
    assert.throws(() => readdirSync(dataDir), /ENOENT/, 'no data directory was made');
  } finally {
    busy.close();
  }
});

test('the development mailbox’s port in use: one line naming its variable; with SMTP_URL set the mailbox is not started, so the port does not matter', async () => {
  const busy = net.createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const port = (busy.address() as net.AddressInfo).port;
  const dataDir = path.join(scratch, 'mailbox-port-in-use');
  try {
    const { code, output } = await launcher({ DATA_DIR: dataDir, MAILDEV_WEB_PORT: String(port) });
    assert.equal(code, 1);
    assertOneLine(
      output,
      new RegExp(`^npm start: port ${port} is already in use on 127\\.0\\.0\\.1; set MAILDEV_WEB_PORT to another port$`),
    );
    // The same busy port, but mail goes elsewhere: the start gets past the port checks, and stops
    // later, at a database that is not there.
    const other = await launcher({
      DATA_DIR: dataDir,
      MAILDEV_WEB_PORT: String(port),
      SMTP_URL: 'smtp://127.0.0.1:2525',
      DATABASE_URL: `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`,
    });
    assert.equal(other.code, 1);
    assertOneLine(other.output, /^npm start: could not prepare the database \w+ on DATABASE_URL/);
  } finally {
    busy.close();
  }
});

test('two services given one port: one line naming both variables', async () => {
  const { code, output } = await launcher({ DATA_DIR: path.join(scratch, 'same-port'), ACCOUNTS_PORT: '45999', SHORTENER_PORT: '45999' });
  assert.equal(code, 1);
  assertOneLine(output, /^npm start: ACCOUNTS_PORT and SHORTENER_PORT are both 45999; each service needs a port of its own$/);
});

test('a bad variable: one line naming it', async () => {
  const { code, output } = await launcher({ DATA_DIR: path.join(scratch, 'bad-variable'), ACCOUNTS_PORT: 'eighty' });
  assert.equal(code, 1);
  assertOneLine(output, /ACCOUNTS_PORT/);
});

test('an unknown JWT_ALGORITHM stops npm start before anything is written: one line naming it', async () => {
  const dataDir = path.join(scratch, 'bad-algorithm');
  const { code, output } = await launcher({ DATA_DIR: dataDir, JWT_ALGORITHM: 'RS256' });
  assert.equal(code, 1);
  assertOneLine(output, /^config error: JWT_ALGORITHM must be one of HS256, ES256, got "RS256"$/);
  assert.throws(() => readdirSync(dataDir), /ENOENT/, 'no data directory was made');
});

test('as root, a data directory the postgres user cannot reach: one line with the ways out, and nothing left behind', {
  skip: process.getuid?.() === 0 ? false : 'only root runs PostgreSQL as another OS user; any other user owns what it creates',
}, async () => {
  const privateDir = path.join(scratch, 'private');
  mkdirSync(privateDir, { mode: 0o700 });
  chmodSync(privateDir, 0o700);
  const { code, output } = await launcher({ DATA_DIR: path.join(privateDir, 'data') });
  assert.equal(code, 1);
  assertOneLine(output, new RegExp(`^npm start: .*cannot enter ${privateDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} .*DATABASE_URL`));
  assert.deepEqual(readdirSync(privateDir), [], 'nothing left behind');
});

test('a second start on a data directory in use: one line, and the first keeps its database', async () => {
  const dataDir = path.join(scratch, 'in-use');
  const quiet = { info: () => {}, warn: () => {}, debug: () => {} };
  const first = await startEmbeddedPostgres(dataDir, quiet);
  try {
    const { code, output } = await launcher({ DATA_DIR: dataDir });
    assert.equal(code, 1);
    assertOneLine(output, /^npm start: the embedded database in .* is in use by another running process/);
  } finally {
    await first.stop();
  }
});
