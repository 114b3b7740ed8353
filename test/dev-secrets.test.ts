import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { loadOrCreateSecret } from '../src/dev/secrets.js';

const SECRETS_MODULE = pathToFileURL(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src', 'dev', 'secrets.ts')).href;
const run = promisify(execFile);

let dir: string;
before(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'secrets-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const secretsIn = async (d: string) => JSON.parse(await readFile(path.join(d, 'secrets.json'), 'utf8')) as Record<string, string>;

describe('loadOrCreateSecret', () => {
  it('generates a secret once, keeps it in secrets.json readable by its owner only, and returns it again', async () => {
    const d = path.join(dir, 'once');
    let calls = 0;
    const first = await loadOrCreateSecret(d, 'A', () => `a${++calls}`);
    const again = await loadOrCreateSecret(d, 'A', () => `a${++calls}`);
    assert.equal(first, 'a1');
    assert.equal(again, 'a1');
    assert.equal(calls, 1);
    assert.deepEqual(await secretsIn(d), { A: 'a1' });
    assert.equal(statSync(path.join(d, 'secrets.json')).mode & 0o777, 0o600);
    assert.ok(!existsSync(path.join(d, 'secrets.json.lock')), 'the lock is released');
  });

  it('six processes adding secrets to one directory at once lose none, and agree on a secret they all ask for', async () => {
    const d = path.join(dir, 'processes');
    // Each process adds five secrets of its own and asks for one they share, all at once.
    const script = `
      import { loadOrCreateSecret } from ${JSON.stringify(SECRETS_MODULE)};
      import { randomUUID } from 'node:crypto';
      const me = process.argv[1];
      const own = await Promise.all([1, 2, 3, 4, 5].map((i) => loadOrCreateSecret(${JSON.stringify(d)}, 'OWN_' + me + '_' + i, () => me + '-' + i)));
      const shared = await loadOrCreateSecret(${JSON.stringify(d)}, 'SHARED', () => randomUUID());
      console.log(JSON.stringify({ own, shared }));
    `;
    const outputs = await Promise.all(
      Array.from({ length: 6 }, (_, p) =>
        run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script, `p${p}`], { timeout: 60_000 }),
      ),
    );
    const results = outputs.map((o) => JSON.parse(o.stdout) as { own: string[]; shared: string });
    const kept = await secretsIn(d);
    for (let p = 0; p < 6; p++) {
      assert.deepEqual(
        results[p]!.own,
        [1, 2, 3, 4, 5].map((i) => `p${p}-${i}`),
      );
      for (let i = 1; i <= 5; i++) assert.equal(kept[`OWN_p${p}_${i}`], `p${p}-${i}`, `OWN_p${p}_${i} kept`);
    }
    assert.equal(new Set(results.map((r) => r.shared)).size, 1, 'every process got the same SHARED secret');
    assert.equal(kept.SHARED, results[0]!.shared);
    assert.equal(Object.keys(kept).length, 31);
    assert.ok(!existsSync(path.join(d, 'secrets.json.lock')), 'the lock is released');
  });

  it('a lock left by a process that no longer runs is taken over', async () => {
    const d = path.join(dir, 'stale');
    await loadOrCreateSecret(d, 'FIRST', () => 'one');
    const gone = spawn(process.execPath, ['-e', '']);
    await new Promise((resolve) => gone.once('exit', resolve));
    await writeFile(path.join(d, 'secrets.json.lock'), String(gone.pid));
    assert.equal(await loadOrCreateSecret(d, 'SECOND', () => 'two'), 'two');
    assert.deepEqual(await secretsIn(d), { FIRST: 'one', SECOND: 'two' });
    assert.ok(!existsSync(path.join(d, 'secrets.json.lock')));
  });

  it('a lock held by a running process is waited for, and the secret added once it is released', async () => {
    const d = path.join(dir, 'held');
    await loadOrCreateSecret(d, 'FIRST', () => 'one');
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)']);
    try {
      await writeFile(path.join(d, 'secrets.json.lock'), String(holder.pid));
      let done = false;
      const adding = loadOrCreateSecret(d, 'SECOND', () => 'two').then((v) => {
        done = true;
        return v;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(done, false, 'waits while the holder runs');
      assert.deepEqual(await secretsIn(d), { FIRST: 'one' });
      await rm(path.join(d, 'secrets.json.lock'));
      assert.equal(await adding, 'two');
      assert.deepEqual(await secretsIn(d), { FIRST: 'one', SECOND: 'two' });
    } finally {
      holder.kill();
    }
  });
});
