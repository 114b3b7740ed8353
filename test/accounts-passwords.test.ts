import assert from 'node:assert/strict';
import { test } from 'node:test';
import bcrypt from 'bcrypt';
import { PasswordHasher, SlotGate, bcryptConcurrency } from '../src/accounts/passwords.js';

test('bcrypt gets one pool thread per core, always leaving one thread of the libuv pool free', () => {
  assert.equal(bcryptConcurrency(4, 2), 2);
  assert.equal(bcryptConcurrency(4, 8), 3);
  assert.equal(bcryptConcurrency(16, 8), 8);
  assert.equal(bcryptConcurrency(1, 2), 1);
  assert.equal(bcryptConcurrency(4, 1), 1);
});

/** A job that finishes when told to. */
function deferred() {
  let finish!: () => void;
  const done = new Promise<void>((resolve) => (finish = resolve));
  return { done, finish };
}
const settle = () => new Promise((resolve) => setImmediate(resolve));

test('the gate runs at most its limit at once and starts the others in arrival order', async () => {
  const gate = new SlotGate(() => 2);
  const started: number[] = [];
  const jobs = [0, 1, 2, 3].map(() => deferred());
  const runs = jobs.map((job, i) =>
    gate.run(async () => {
      started.push(i);
      await job.done;
      return i;
    }),
  );
  await settle();
  assert.deepEqual(started, [0, 1]);
  assert.equal(gate.queued, 2);
  jobs[1]!.finish();
  await settle();
  assert.deepEqual(started, [0, 1, 2]);
  jobs[0]!.finish();
  await settle();
  assert.deepEqual(started, [0, 1, 2, 3]);
  jobs[2]!.finish();
  jobs[3]!.finish();
  assert.deepEqual(await Promise.all(runs), [0, 1, 2, 3]);
  assert.equal(gate.running, 0);
});

test('the gate follows a limit that drops and grows (one slot fewer while requests need the CPU)', async () => {
  let limit = 2;
  const gate = new SlotGate(() => limit);
  const started: number[] = [];
  const jobs = [0, 1, 2, 3].map(() => deferred());
  const runs = jobs.map((job, i) =>
    gate.run(async () => {
      started.push(i);
      await job.done;
    }),
  );
  await settle();
  assert.deepEqual(started, [0, 1]);
  limit = 1;
  jobs[0]!.finish();
  await settle();
  // One still runs and the limit is now one: nothing new starts.
  assert.deepEqual(started, [0, 1]);
  jobs[1]!.finish();
  await settle();
  assert.deepEqual(started, [0, 1, 2]);
  limit = 2;
  gate.wake();
  await settle();
  assert.deepEqual(started, [0, 1, 2, 3]);
  jobs[2]!.finish();
  jobs[3]!.finish();
  await Promise.all(runs);
});

test('a job that fails frees its slot', async () => {
  const gate = new SlotGate(() => 1);
  await assert.rejects(gate.run(async () => Promise.reject(new Error('boom'))), /boom/);
  assert.equal(await gate.run(async () => 'next'), 'next');
});

test('the hasher makes cost-12 bcrypt hashes that verify', async () => {
  const hasher = new PasswordHasher(2, { yieldToRequests: true });
  try {
    const hash = await hasher.hash('a password');
    assert.match(hash, /^\$2b\$12\$/);
    assert.ok(await bcrypt.compare('a password', hash));
    assert.equal(await hasher.verify('a password', hash), true);
    assert.equal(await hasher.verify('another one', hash), false);
  } finally {
    hasher.close();
  }
});
