import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import bcrypt from 'bcrypt';

export const BCRYPT_COST = 12;

/**
 * How many bcrypt jobs may sit on the libuv thread pool at once: one per core
 * (more cannot go faster), and always one thread fewer than the pool, because
 * the same pool resolves host names and runs the PBKDF2 of PostgreSQL's SCRAM
 * login. Without the bound a login storm queues new database connections
 * behind seconds of hashing and they time out.
 */
export function bcryptConcurrency(threadPoolSize: number, cores = availableParallelism()): number {
  return Math.max(1, Math.min(cores, threadPoolSize - 1));
}

/**
 * At most `slots()` jobs at once; the others wait in arrival order. `slots` is
 * read again whenever a job could start, so the limit may change over time.
 */
export class SlotGate {
  private active = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly slots: () => number) {}

  get running(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(job: () => Promise<T>): Promise<T> {
    let first = true;
    while (this.active >= this.slots()) {
      // Woken while the limit has dropped: back to the front, keeping the order.
      await new Promise<void>((resolve) => (first ? this.waiting.push(resolve) : this.waiting.unshift(resolve)));
      first = false;
    }
    this.active += 1;
    try {
      return await job();
    } finally {
      this.active -= 1;
      this.wake();
    }
  }

  /** Lets the first waiter try again (after a job ends, or when the limit grew). */
  wake(): void {
    this.waiting.shift()?.();
  }
}

/** Event-loop utilization above which other requests are taken to need a core. */
const BUSY_LOOP = 0.5;

/**
 * Cost-12 bcrypt through the async API (the libuv pool, never the event loop),
 * with at most `concurrency` jobs on the pool; the rest wait, in order.
 *
 * With `yieldToRequests`, one slot fewer is used while the event loop is busy
 * serving other requests: a login storm alone still gets every core, but
 * beside other traffic it leaves one, so cheap requests do not queue for CPU
 * behind CPU-bound hashing.
 */
export class PasswordHasher {
  private busy = false;
  private readonly gate = new SlotGate(() => (this.busy ? this.concurrency - 1 : this.concurrency));
  private readonly sampler: NodeJS.Timeout | undefined;

  constructor(
    readonly concurrency: number,
    opts: { yieldToRequests?: boolean } = {},
  ) {
    if (opts.yieldToRequests && concurrency > 1) {
      let last = performance.eventLoopUtilization();
      this.sampler = setInterval(() => {
        const now = performance.eventLoopUtilization();
        const busy = performance.eventLoopUtilization(now, last).utilization > BUSY_LOOP;
        last = now;
        if (this.busy && !busy) {
          this.busy = false;
          this.gate.wake();
        }
        this.busy = busy;
      }, 200);
      this.sampler.unref();
    }
  }

  hash(password: string): Promise<string> {
    return this.gate.run(() => bcrypt.hash(password, BCRYPT_COST));
  }

  verify(password: string, hash: string): Promise<boolean> {
    return this.gate.run(() => bcrypt.compare(password, hash));
  }

  close(): void {
    clearInterval(this.sampler);
  }
}

let dummyHash: Promise<string> | undefined;

/**
 * A cost-12 hash of a random password nobody knows. Login compares against it
 * when the email is unknown, so an unknown email and a wrong password cost the
 * same bcrypt work and cannot be told apart by timing. Made once per process.
 */
export function dummyPasswordHash(hasher: PasswordHasher): Promise<string> {
  dummyHash ??= hasher.hash(randomBytes(32).toString('base64url')).catch((err: unknown) => {
    dummyHash = undefined;
    throw err;
  });
  return dummyHash;
}
