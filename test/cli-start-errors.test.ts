import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../src/kit/embedded-postgres.js';
import { freePorts } from './helpers/ports.js';

// `npm start` as a newcomer meets it: what stops a start is one line that says
// what is wrong and how to get past it, never a stack trace, and a start that
// cannot work leaves nothing behind.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const scratch = mkdtempSync(path.join(tmpdir(), 'cli-start-'));
chmodSync(scratch, 0o755);
after(() => rmSync(scratch, { recursive: true, force: true }));

async function launcher(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const ports = await freePorts(4);
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts')], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'warn',
      ACCOUNTS_PORT: String(ports[0]),
      SHORTENER_PORT: String(ports[1]),
      NOTES_PORT: String(ports[2]),
      IDP_PORT: String(ports[3]),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const code: number | null = await new Promise((resolve) => child.on('exit', (c) => resolve(c)));
  clearTimeout(timer);
  return { code, output };
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

test(
  'as root, a data directory the postgres user cannot reach: one line with the ways out, and nothing left behind',
  { skip: process.getuid?.() === 0 ? false : 'only root runs PostgreSQL as another OS user; any other user owns what it creates' },
  async () => {
    const privateDir = path.join(scratch, 'private');
    mkdirSync(privateDir, { mode: 0o700 });
    chmodSync(privateDir, 0o700);
    const { code, output } = await launcher({ DATA_DIR: path.join(privateDir, 'data') });
    assert.equal(code, 1);
    assertOneLine(output, new RegExp(`^npm start: .*cannot enter ${privateDir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} .*DATABASE_URL`));
    assert.deepEqual(readdirSync(privateDir), [], 'nothing left behind');
  },
);

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
