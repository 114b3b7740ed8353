import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { test } from 'node:test';
import bcrypt from 'bcrypt';
import { BCRYPT_NICE, type HashJobKind, PasswordHasher, PasswordHasherBusy } from '../src/kit/password-hasher.js';

// Real bcrypt on real worker threads. Costs are chosen so a job takes long
// enough (tens to hundreds of ms) for queues to build up; the assertions are
// on order and counts, never on time.

/** Waits, a few ms at a time, until `ready` holds (bounded). */
async function until(ready: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

test('the hasher makes bcrypt hashes of its cost that verify', async () => {
  const hasher = new PasswordHasher({ cost: 12, workers: 2 });
  try {
    const hash = await hasher.hash('a password');
    assert.match(hash, /^\$2b\$12\$/);
    assert.ok(await bcrypt.compare('a password', hash));
    assert.equal(await hasher.verify('a password', hash), true);
    assert.equal(await hasher.verify('another one', hash), false);
    // A malformed hash never matches.
    assert.equal(await hasher.verify('a password', 'not a hash'), false);
    assert.equal(await hasher.verify('a password', hash), true);
    assert.deepEqual(hasher.started, { hash: 1, verify: 4 });
  } finally {
    await hasher.close();
  }
  const low = new PasswordHasher({ cost: 10, workers: 1 });
  try {
    assert.match(await low.hash('a password'), /^\$2b\$10\$/);
  } finally {
    await low.close();
  }
});

test('a free worker takes a waiting verify before any waiting hash: a login overtakes a registration flood', async () => {
  const starts: Array<{ kind: HashJobKind; hashesWaiting: number }> = [];
  const hasher = new PasswordHasher({
    cost: 11,
    workers: 1,
    onStart: (kind, waiting) => starts.push({ kind, hashesWaiting: waiting.hash }),
  });
  try {
    const stored = await hasher.hash('the password');
    starts.length = 0;
    const flood = Array.from({ length: 8 }, (_, i) => hasher.hash(`flood ${i}`));
    await until(() => hasher.queued.hash === 7, 'the flood to queue');
    const login = hasher.verify('the password', stored);
    assert.equal(await login, true);
    await Promise.all(flood);
    // The verify started right after the one hash already running, with the other 7 still waiting.
    assert.deepEqual(
      starts.map((s) => s.kind),
      ['hash', 'verify', 'hash', 'hash', 'hash', 'hash', 'hash', 'hash', 'hash'],
    );
    assert.equal(starts[1]!.hashesWaiting, 7);
  } finally {
    await hasher.close();
  }
});

test('a full queue refuses the job at once with a 503 PasswordHasherBusy and Retry-After; the other kind still queues', async () => {
  const hasher = new PasswordHasher({ cost: 11, workers: 1, maxQueued: 3 });
  try {
    const accepted = Array.from({ length: 4 }, (_, i) => hasher.hash(`accepted ${i}`));
    assert.deepEqual(hasher.queued, { hash: 3, verify: 0 });
    const refused = await hasher.hash('one too many').then(
      () => assert.fail('a job beyond the queue was accepted'),
      (err: unknown) => err,
    );
    assert.ok(refused instanceof PasswordHasherBusy);
    assert.equal(refused.statusCode, 503);
    assert.ok(refused.retryAfterSeconds >= 1 && refused.retryAfterSeconds <= 60);
    assert.equal(refused.headers['retry-after'], String(refused.retryAfterSeconds));
    // Logins have their own queue: a registration flood cannot fill it.
    const stored = await Promise.all([hasher.verify('x', '$2b$04$invalidinvalidinvalidinvalidinvalidinvalidinvalidinv'), ...accepted]);
    assert.equal(stored[0], false);
    assert.deepEqual(hasher.started, { hash: 4, verify: 1 });
    assert.deepEqual(hasher.refused, { hash: 1, verify: 0 });
  } finally {
    await hasher.close();
  }
});

test('a login flood cannot starve registrations: one waiting hash is served after every `verifiesPerHash` verifies', async () => {
  const order: HashJobKind[] = [];
  const hasher = new PasswordHasher({ cost: 10, workers: 1, verifiesPerHash: 3, onStart: (kind) => order.push(kind) });
  try {
    const stored = await hasher.hash('the password');
    order.length = 0;
    const running = hasher.hash('running');
    const registrations = [hasher.hash('first'), hasher.hash('second')];
    const logins = Array.from({ length: 7 }, () => hasher.verify('the password', stored));
    await Promise.all([running, ...registrations, ...logins]);
    assert.deepEqual(order, ['hash', 'verify', 'verify', 'verify', 'hash', 'verify', 'verify', 'verify', 'hash', 'verify']);
  } finally {
    await hasher.close();
  }
});

test('close() refuses what still waits and ends the workers', async () => {
  const hasher = new PasswordHasher({ cost: 12, workers: 1 });
  const running = assert.rejects(hasher.hash('running'));
  const waiting = assert.rejects(hasher.hash('waiting'), /closed/);
  await hasher.close();
  await Promise.all([waiting, running]);
  await assert.rejects(hasher.hash('after'), /closed/);
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

/**
 * How many deprioritized threads are left once ended ones are gone: terminate() resolves when a worker
 * has stopped, but its OS thread exits a moment later, so a busy machine can list it for a while.
 */
async function hashingThreadsAfterExit(): Promise<number> {
  const count = () => [...threadNiceValues().values()].filter((nice) => nice === BCRYPT_NICE).length;
  const deadline = Date.now() + 5_000;
  while (count() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  return count();
}

test('hashing runs on at most `workers` threads at a lower priority; the event loop keeps its own', async () => {
  assert.equal(process.platform, 'linux', 'the hasher lowers the priority of its threads on Linux');
  const hasher = new PasswordHasher({ cost: 12, workers: 2 });
  try {
    const before = await hashingThreadsAfterExit();
    await Promise.all([1, 2, 3, 4].map((i) => hasher.hash(`password ${i}`)));
    const niceValues = threadNiceValues();
    assert.equal([...niceValues.values()].filter((nice) => nice === BCRYPT_NICE).length - before, 2);
    assert.equal(niceValues.get(process.pid), 0, 'the main thread was deprioritized too');
  } finally {
    await hasher.close();
  }
  assert.equal(await hashingThreadsAfterExit(), 0, 'a hashing thread outlived close()');
});
