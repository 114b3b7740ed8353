import assert from 'node:assert/strict';
import { test } from 'node:test';
import bcrypt from 'bcrypt';
import { readFileSync, readdirSync } from 'node:fs';
import { BCRYPT_NICE, PasswordHasher, SlotGate } from '../src/accounts/passwords.js';

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
  const hasher = new PasswordHasher(2);
  try {
    const hash = await hasher.hash('a password');
    assert.match(hash, /^\$2b\$12\$/);
    assert.ok(await bcrypt.compare('a password', hash));
    assert.equal(await hasher.verify('a password', hash), true);
    assert.equal(await hasher.verify('another one', hash), false);
    // A malformed hash never matches.
    assert.equal(await hasher.verify('a password', 'not a hash'), false);
    assert.equal(await hasher.verify('a password', hash), true);
  } finally {
    await hasher.close();
  }
});

/** The nice value of each thread of this process (Linux: nice is per thread). */
function threadNiceValues(): Map<number, number> {
  const values = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    // Fields after the command name, which ends with the last ')': state is field 3, nice field 19.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    values.set(Number(tid), Number(fields[19 - 3]));
  }
  return values;
}

test('hashing runs on at most `concurrency` worker threads at a lower priority; the event loop keeps its own', async () => {
  assert.equal(process.platform, 'linux', 'this service lowers the priority of its hashing threads on Linux');
  const hasher = new PasswordHasher(2);
  try {
    const before = [...threadNiceValues().values()].filter((nice) => nice === BCRYPT_NICE).length;
    await Promise.all([1, 2, 3, 4].map((i) => hasher.hash(`password ${i}`)));
    const niceValues = threadNiceValues();
    assert.equal([...niceValues.values()].filter((nice) => nice === BCRYPT_NICE).length - before, 2);
    assert.equal(niceValues.get(process.pid), 0, 'the main thread was deprioritized too');
  } finally {
    await hasher.close();
  }
  assert.equal([...threadNiceValues().values()].filter((nice) => nice === BCRYPT_NICE).length, 0);
});
