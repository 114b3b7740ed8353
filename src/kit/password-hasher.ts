import { availableParallelism } from 'node:os';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { int } from './config.js';
import { HttpError } from './http/errors.js';

const require = createRequire(import.meta.url);

/** Most jobs of each kind (hash, verify) waiting for a worker; one more is refused with a 503. */
export const DEFAULT_BCRYPT_QUEUE_MAX = 32;

/**
 * The variable of every service that hashes passwords. Each service picks a
 * default worth a few seconds of its own bcrypt cost: a queue longer than
 * that only makes clients wait past their patience.
 */
export const passwordHasherVars = (defaultQueueMax = DEFAULT_BCRYPT_QUEUE_MAX) => ({
  BCRYPT_QUEUE_MAX: int({ default: defaultQueueMax, min: 1, max: 100_000 }),
});

/**
 * The hashing queue is full (or a job waited too long for a worker): the
 * server is saturated, so the client is told when to come back instead of
 * waiting without end. An HttpError, so services that render HttpError give
 * it their own envelope as is.
 */
export class PasswordHasherBusy extends HttpError {
  constructor(readonly retryAfterSeconds: number) {
    super(503, `Server busy, try again in ${retryAfterSeconds} seconds.`, { 'retry-after': String(retryAfterSeconds) });
    this.name = 'PasswordHasherBusy';
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

/** A login checks a password (`verify`); a registration makes a hash (`hash`). */
export type HashJobKind = 'verify' | 'hash';

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

interface Waiting {
  kind: HashJobKind;
  job: BcryptJob;
  /** performance.now() when it began to wait, for observeWait. */
  since: number;
  resolve: (value: string | boolean) => void;
  reject: (err: Error) => void;
}

export interface PasswordHasherOptions {
  /** bcrypt cost of new hashes (verifying reads the cost from the stored hash). */
  cost: number;
  /** Worker threads; one per core by default, since more cannot go faster. */
  workers?: number;
  /** Most jobs of each kind waiting for a worker (BCRYPT_QUEUE_MAX). */
  maxQueued?: number;
  /** While both kinds wait, one hash is served after this many verifies, so registrations are never starved. */
  verifiesPerHash?: number;
  /** Called as each job is handed to a worker, with what is still waiting (metrics, tests). */
  onStart?: (kind: HashJobKind, waiting: Record<HashJobKind, number>) => void;
}

/**
 * bcrypt on a few low-priority worker threads: off the event loop and off the
 * libuv pool, which stays free for token checks (WebCrypto HMAC), DNS and the
 * database's SCRAM logins.
 *
 * Jobs beyond the workers wait in two bounded queues, one per kind; when a
 * queue is full the job is refused at once with PasswordHasherBusy (503 +
 * Retry-After). A free worker takes a waiting `verify` first, except that
 * after `verifiesPerHash` verifies in a row it takes a waiting `hash`. So a
 * login of an existing account waits for at most the jobs already running,
 * the logins ahead of it and one registration per `verifiesPerHash` of those,
 * however many registrations are queued; and a registration is never starved
 * by a login flood. Every wait is thus bounded by the queue lengths, counted
 * in jobs. Workers start on first use and are ended by close().
 */
export class PasswordHasher {
  readonly cost: number;
  readonly workers: number;
  readonly maxQueued: number;
  readonly verifiesPerHash: number;
  /** Jobs handed to a worker so far, by kind: the bcrypt work actually done. */
  readonly started: Record<HashJobKind, number> = { verify: 0, hash: 0 };
  /** Jobs refused because the queue was full or the wait too long, by kind. */
  readonly refused: Record<HashJobKind, number> = { verify: 0, hash: 0 };
  /** Told how long each queued job waited for a worker, in seconds (metrics). */
  observeWait: (seconds: number) => void = () => {};

  private readonly waiting: Record<HashJobKind, Waiting[]> = { verify: [], hash: [] };
  private readonly idle: BcryptWorker[] = [];
  private readonly all = new Set<BcryptWorker>();
  private readonly onStart: PasswordHasherOptions['onStart'];
  private inFlight = 0;
  private verifiesInARow = 0;
  private closed = false;
  /** Moving average of one job's duration, for Retry-After. */
  private jobMs = 250;

  constructor(opts: PasswordHasherOptions) {
    this.cost = opts.cost;
    this.workers = Math.max(1, opts.workers ?? availableParallelism());
    this.maxQueued = opts.maxQueued ?? DEFAULT_BCRYPT_QUEUE_MAX;
    this.verifiesPerHash = opts.verifiesPerHash ?? 4;
    this.onStart = opts.onStart;
  }

  /** Jobs on a worker now. */
  get running(): number {
    return this.inFlight;
  }

  /** Jobs waiting for a worker, by kind. */
  get queued(): Record<HashJobKind, number> {
    return { verify: this.waiting.verify.length, hash: this.waiting.hash.length };
  }

  async hash(password: string): Promise<string> {
    return (await this.submit('hash', { password, cost: this.cost })) as string;
  }

  /** False for a wrong password and for a malformed hash. */
  async verify(password: string, hash: string): Promise<boolean> {
    return (await this.submit('verify', { password, cost: this.cost, hash })) as boolean;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const queue of Object.values(this.waiting)) {
      for (const waiting of queue.splice(0)) waiting.reject(new Error('password hasher closed'));
    }
    await Promise.all([...this.all].map((w) => w.terminate()));
    this.all.clear();
    this.idle.length = 0;
  }

  private submit(kind: HashJobKind, job: BcryptJob): Promise<string | boolean> {
    if (this.closed) return Promise.reject(new Error('password hasher closed'));
    // A free worker means nothing waits (a job ending hands its worker on at once).
    if (this.inFlight < this.workers) {
      this.observeWait(0);
      return this.start(kind, job);
    }
    const queue = this.waiting[kind];
    if (queue.length >= this.maxQueued) return Promise.reject(this.busy(kind));
    return new Promise((resolve, reject) => queue.push({ kind, job, since: performance.now(), resolve, reject }));
  }

  private busy(kind: HashJobKind): PasswordHasherBusy {
    this.refused[kind] += 1;
    // Long enough for the queue ahead to drain at the current pace; at least 1 s.
    const ahead = this.inFlight + this.waiting.verify.length + (kind === 'hash' ? this.waiting.hash.length : 0);
    return new PasswordHasherBusy(Math.min(60, Math.max(1, Math.ceil((ahead * this.jobMs) / this.workers / 1000))));
  }

  private async start(kind: HashJobKind, job: BcryptJob): Promise<string | boolean> {
    this.inFlight += 1;
    this.started[kind] += 1;
    this.onStart?.(kind, this.queued);
    const began = performance.now();
    try {
      return await this.onWorker(job);
    } finally {
      this.jobMs = 0.8 * this.jobMs + 0.2 * (performance.now() - began);
      this.inFlight -= 1;
      this.next();
    }
  }

  /** Hands the freed worker to the first waiting login, or to the first waiting registration when its turn has come. */
  private next(): void {
    const hashTurn = this.verifiesInARow >= this.verifiesPerHash && this.waiting.hash.length > 0;
    const waiting = (hashTurn ? undefined : this.waiting.verify.shift()) ?? this.waiting.hash.shift();
    if (!waiting) return;
    this.verifiesInARow = waiting.kind === 'verify' ? this.verifiesInARow + 1 : 0;
    this.observeWait((performance.now() - waiting.since) / 1000);
    this.start(waiting.kind, waiting.job).then(waiting.resolve, waiting.reject);
  }

  private async onWorker(job: BcryptJob): Promise<string | boolean> {
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
  }
}
