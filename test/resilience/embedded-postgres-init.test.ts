// The first start of the embedded PostgreSQL runs initdb, which reads the
// superuser password from a file. That file must never be readable by anyone
// but its owner, not even for a moment, and must not outlive the start: not
// after initdb fails, not after the start is killed (SIGKILL) in the middle of
// initdb. After either, the next start must work.
// Each start runs as its own process with its own TMPDIR, which the test
// watches (fs.watch plus polling every few ms), together with DATA_DIR.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { reportFigures } from './helpers/figures.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const entry = path.join(root, 'test', 'resilience', 'helpers', 'embedded-start.ts');
const START_BOUND_MS = 180_000;

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Setup {
  dataDir: string;
  tmp: string;
  password: string;
}

/** A DATA_DIR whose secrets file already holds the superuser password, so the test knows what to look for. */
function setup(): Setup {
  const base = mkdtempSync(path.join(tmpdir(), 'svc-initdb-'));
  dirs.push(base);
  // As root the server runs as the `postgres` OS user, which must reach DATA_DIR.
  chmodSync(base, 0o755);
  const dataDir = path.join(base, 'data');
  const tmp = path.join(base, 'tmp');
  mkdirSync(dataDir, { mode: 0o755 });
  // A world-writable sticky directory, as /tmp is.
  mkdirSync(tmp);
  chmodSync(tmp, 0o1777);
  const password = randomBytes(24).toString('base64url');
  writeFileSync(path.join(dataDir, 'secrets.json'), JSON.stringify({ EMBEDDED_PG_PASSWORD: password }), { mode: 0o600 });
  return { dataDir, tmp, password };
}

interface Sighting {
  file: string;
  mode: number;
  secret: boolean;
}

/** Every file seen in TMPDIR and in DATA_DIR (outside the cluster's own directory, whose files initdb creates 0600). */
function watchFiles(s: Setup): { seen: Map<string, Sighting>; stop: () => void } {
  const seen = new Map<string, Sighting>();
  const look = (file: string) => {
    try {
      const st = statSync(file);
      if (!st.isFile()) return;
      const secret = readFileSync(file, 'utf8').includes(s.password);
      const key = `${file}:${st.mode.toString(8)}:${secret}`;
      if (!seen.has(key)) seen.set(key, { file, mode: st.mode & 0o777, secret });
    } catch {
      // gone between listing and reading
    }
  };
  const scan = (dir: string, skip?: string) => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const name of entries) {
      const full = path.join(dir, name);
      if (full === skip) continue;
      try {
        if (statSync(full).isDirectory()) scan(full);
        else look(full);
      } catch {
        // gone meanwhile
      }
    }
  };
  const tick = () => {
    scan(s.tmp);
    scan(s.dataDir, path.join(s.dataDir, 'pg'));
  };
  const watchers = [
    watch(s.tmp, { recursive: true }, (_e, name) => name && look(path.join(s.tmp, String(name)))),
    watch(s.dataDir, (_e, name) => name && tick()),
  ];
  const timer = setInterval(tick, 3);
  return {
    seen,
    stop: () => {
      clearInterval(timer);
      for (const w of watchers) w.close();
      tick();
    },
  };
}

function launch(s: Setup): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  // Own process group, so a kill reaches initdb as well, as when a terminal or a supervisor kills the start.
  const child = spawn(process.execPath, ['--import', 'tsx', entry, s.dataDir], {
    cwd: root,
    env: { ...process.env, TMPDIR: s.tmp },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timer = setTimeout(() => child.kill('SIGKILL'), START_BOUND_MS);
  void exited.then(() => clearTimeout(timer));
  return { child, output: () => out, exited };
}

/** Files holding the password that others than their owner can read. */
function exposed(seen: Map<string, Sighting>): Sighting[] {
  return [...seen.values()].filter((f) => f.secret && (f.mode & 0o077) !== 0);
}

/** Files holding the password now, other than the secrets file itself (which is 0600). */
function secretFilesLeft(s: Setup): string[] {
  const left: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const full = path.join(dir, name);
      if (full === path.join(s.dataDir, 'pg') || full === path.join(s.dataDir, 'secrets.json')) continue;
      if (statSync(full).isDirectory()) walk(full);
      else if (readFileSync(full, 'utf8').includes(s.password)) left.push(full);
    }
  };
  walk(s.tmp);
  walk(s.dataDir);
  return left;
}

const modes = (seen: Map<string, Sighting>) =>
  [...seen.values()].filter((f) => f.secret).map((f) => `${path.basename(f.file)} 0${f.mode.toString(8)}`);

test('first start: the password file initdb reads is never readable by others and does not outlive the start', async (t) => {
  const s = setup();
  const watcher = watchFiles(s);
  const start = launch(s);
  const code = await start.exited;
  watcher.stop();
  assert.equal(code, 0, start.output());
  reportFigures(t, 'embedded initdb password file (first start)', {
    'files with the password seen': modes(watcher.seen).join(', ') || 'none',
  });
  assert.deepEqual(exposed(watcher.seen), [], 'a file holding the password was readable by others');
  // The package writes its own password file to TMPDIR, with the default mode.
  assert.deepEqual(
    [...watcher.seen.values()]
      .filter((f) => f.file.startsWith(s.tmp) && path.basename(f.file).startsWith('pg-password-'))
      .map((f) => f.file),
    [],
    'a password file appeared in TMPDIR',
  );
  assert.deepEqual(secretFilesLeft(s), []);
});

test('a start killed with SIGKILL during initdb leaves the password nowhere others can read; the next start removes it and works', async () => {
  const s = setup();
  const watcher = watchFiles(s);
  const start = launch(s);
  // PG_VERSION is among the first files initdb writes; the bootstrap that follows takes seconds.
  const versionFile = path.join(s.dataDir, 'pg', 'PG_VERSION');
  while (!existsSync(versionFile) && start.child.exitCode === null) await new Promise((r) => setTimeout(r, 2));
  assert.equal(start.child.exitCode, null, `the start ended before initdb began: ${start.output()}`);
  process.kill(-start.child.pid!, 'SIGKILL');
  await start.exited;
  // initdb and its bootstrap backend may take a moment to go.
  await new Promise((r) => setTimeout(r, 500));
  watcher.stop();
  assert.deepEqual(exposed(watcher.seen), [], 'a file holding the password was readable by others');
  // A killed process cleans nothing up. What it may leave is initdb's password file in DATA_DIR, in a
  // directory only its owner can enter, as protected as the secrets file that holds the same password.
  for (const file of secretFilesLeft(s)) {
    assert.equal(path.dirname(path.dirname(file)), s.dataDir, `the killed start left the password in ${file}`);
    assert.equal(statSync(file).mode & 0o077, 0, `${file} is readable by others`);
    assert.equal(statSync(path.dirname(file)).mode & 0o077, 0, `${path.dirname(file)} is open to others`);
  }

  const again = launch(s);
  assert.equal(await again.exited, 0, `the start after the killed one failed: ${again.output()}`);
  assert.deepEqual(secretFilesLeft(s), [], 'the next start did not remove what the killed one left');
});

test('a failed initdb leaves no password behind, and a start works once its cause is gone', async () => {
  const s = setup();
  // initdb refuses a data directory that is not empty.
  mkdirSync(path.join(s.dataDir, 'pg'), { mode: 0o700 });
  writeFileSync(path.join(s.dataDir, 'pg', 'stray'), 'not a cluster');
  const watcher = watchFiles(s);
  const failed = launch(s);
  const code = await failed.exited;
  watcher.stop();
  assert.notEqual(code, 0, 'initdb should have failed');
  assert.match(failed.output(), /not empty/);
  assert.ok(!failed.output().includes(s.password), 'the password was printed');
  assert.deepEqual(exposed(watcher.seen), []);
  assert.deepEqual(secretFilesLeft(s), [], 'the failed start left the password behind');

  rmSync(path.join(s.dataDir, 'pg', 'stray'));
  const again = launch(s);
  assert.equal(await again.exited, 0, `the start after the failed one failed: ${again.output()}`);
});
