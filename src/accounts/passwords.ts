import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

const require = createRequire(import.meta.url);

export const BCRYPT_COST = 12;

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

// Each worker lowers its own scheduling priority (on Linux nice is per
// thread), then hashes synchronously: the hashing competes for the CPU only
// with what is left over by the event loop, the database and the pool threads
// that check tokens, so a login storm costs those almost no latency.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const os = require('node:os');
const bcrypt = require(workerData.bcryptPath);
if (workerData.nice) { try { os.setPriority(0, workerData.nice); } catch {} }
parentPort.on('message', (job) => {
  try {
    const result = job.hash === undefined ? bcrypt.hashSync(job.password, job.cost) : bcrypt.compareSync(job.password, job.hash);
    parentPort.postMessage({ result });
  } catch (err) {
    parentPort.postMessage({ error: String((err && err.message) || err) });
  }
});`;

/** How much lower than the request path bcrypt runs (a nice value; Linux only, where it is per thread). */
export const BCRYPT_NICE = 10;

interface BcryptJob {
  password: string;
  cost: number;
  hash?: string;
}

/** One worker thread running one bcrypt job at a time. */
class BcryptWorker {
  private readonly worker: Worker;
  private current: { resolve: (value: string | boolean) => void; reject: (err: Error) => void } | undefined;
  dead = false;

  constructor() {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { bcryptPath: require.resolve('bcrypt'), nice: process.platform === 'linux' ? BCRYPT_NICE : 0 },
    });
    // Only a worker with a job in hand keeps the process alive.
    this.worker.unref();
    this.worker.on('message', (reply: { result?: string | boolean; error?: string }) => {
      const current = this.current;
      this.current = undefined;
      this.worker.unref();
      if (reply.error !== undefined) current?.reject(new Error(reply.error));
      else current?.resolve(reply.result!);
    });
    const fail = (err: Error) => {
      this.dead = true;
      this.current?.reject(err);
      this.current = undefined;
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`bcrypt worker exited with code ${code}`)));
  }

  run(job: BcryptJob): Promise<string | boolean> {
    return new Promise((resolve, reject) => {
      this.current = { resolve, reject };
      this.worker.ref();
      this.worker.postMessage(job);
    });
  }

  terminate(): Promise<number> {
    return this.worker.terminate();
  }
}

/**
 * Cost-12 bcrypt on at most `concurrency` low-priority worker threads (one
 * per core: more cannot go faster), off the event loop and off the libuv
 * pool, which stays free for token checks (WebCrypto HMAC), DNS and the
 * database's SCRAM logins. Jobs beyond the workers wait here, in arrival
 * order. Workers start on first use and are ended by close().
 */
export class PasswordHasher {
  private readonly idle: BcryptWorker[] = [];
  private readonly all = new Set<BcryptWorker>();
  private readonly gate: SlotGate;
  /** Told how long each job waited for a worker, in seconds. */
  observeWait: (seconds: number) => void = () => {};

  constructor(readonly concurrency: number) {
    this.gate = new SlotGate(() => this.concurrency);
  }

  /** Jobs waiting for a worker. */
  get queued(): number {
    return this.gate.queued;
  }

  /** Jobs on a worker now. */
  get running(): number {
    return this.gate.running;
  }

  async hash(password: string): Promise<string> {
    return (await this.run({ password, cost: BCRYPT_COST })) as string;
  }

  async verify(password: string, hash: string): Promise<boolean> {
    return (await this.run({ password, cost: BCRYPT_COST, hash })) as boolean;
  }

  async close(): Promise<void> {
    await Promise.all([...this.all].map((w) => w.terminate()));
    this.all.clear();
    this.idle.length = 0;
  }

  private run(job: BcryptJob): Promise<string | boolean> {
    const queuedAt = performance.now();
    return this.gate.run(async () => {
      this.observeWait((performance.now() - queuedAt) / 1000);
      let worker = this.idle.pop();
      while (worker?.dead) {
        this.all.delete(worker);
        worker = this.idle.pop();
      }
      if (!worker) {
        worker = new BcryptWorker();
        this.all.add(worker);
      }
      try {
        return await worker.run(job);
      } finally {
        if (worker.dead) this.all.delete(worker);
        else this.idle.push(worker);
      }
    });
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
