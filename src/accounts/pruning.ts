import type { Clock } from '../kit/clock.js';
import type { Pool } from '../kit/db.js';

/**
 * How long a session that can never be used again is kept before it is deleted.
 * While its row exists, a late refresh with one of its tokens is recognised as a
 * token of an ended session (answered 401 like any bad token, and visible to an
 * operator looking at the table) rather than as one never issued.
 */
export const ENDED_SESSION_RETENTION_MS = 7 * 86_400_000;
/** Rows deleted per statement: each statement holds its row locks only this long. */
export const PRUNE_BATCH_SIZE = 1000;
/** Statements per run at most, so one run is bounded however far behind it is; the next run goes on. */
export const PRUNE_MAX_BATCHES = 100;

export interface PruneCounts {
  sessions: number;
  emailTokens: number;
}

export interface PruningOptions {
  pool: Pool;
  clock: Clock;
  /** Between the end of one run and the start of the next; 0: never runs (PRUNE_INTERVAL). */
  intervalMs: number;
  /** A session unused this long, or this old, can never be used again (SESSION_IDLE_TIMEOUT, SESSION_MAX_LIFETIME). */
  idleMs: number;
  maxLifetimeMs: number;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  batchSize?: number;
  maxBatches?: number;
  /** The longest wait before the first run after a start (default a minute), so an instance restarted more often than intervalMs (each deploy) still prunes. */
  firstRunMaxDelayMs?: number;
}

export interface Pruning {
  /** One run now (the timer's runs and this one never overlap); resolves with what it deleted. */
  runOnce(): Promise<PruneCounts>;
  /** No new run starts; resolves once a run in progress has finished its current statement. */
  stop(): Promise<void>;
}

/**
 * Deletes what can never be used again: sessions ended, idle-expired or past
 * their lifetime for longer than ENDED_SESSION_RETENTION_MS, and email tokens
 * used or expired (a deleted one answers exactly as a used one did). The audit
 * log is never pruned: it is append-only by design (migration 002).
 *
 * Each statement deletes at most batchSize rows and skips rows another
 * transaction holds (a refresh, or another instance's prune), so several
 * instances may run at once: each row is deleted once, nobody waits.
 */
export function startPruning(options: PruningOptions): Pruning {
  const batchSize = options.batchSize ?? PRUNE_BATCH_SIZE;
  const maxBatches = options.maxBatches ?? PRUNE_MAX_BATCHES;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<PruneCounts> | undefined;

  async function deleteInBatches(sql: string, params: unknown[]): Promise<number> {
    let total = 0;
    for (let batch = 0; batch < maxBatches && !stopped; batch++) {
      const { rowCount } = await options.pool.query(sql, [...params, batchSize]);
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < batchSize) break;
    }
    return total;
  }

  async function prune(): Promise<PruneCounts> {
    const now = options.clock();
    const sessions = await deleteInBatches(
      `DELETE FROM sessions WHERE ctid IN (
         SELECT ctid FROM sessions
         WHERE ended_at < $1 OR last_used_at < $2 OR created_at < $3
         LIMIT $4 FOR UPDATE SKIP LOCKED)`,
      [
        new Date(now - ENDED_SESSION_RETENTION_MS),
        new Date(now - options.idleMs - ENDED_SESSION_RETENTION_MS),
        new Date(now - options.maxLifetimeMs - ENDED_SESSION_RETENTION_MS),
      ],
    );
    const emailTokens = await deleteInBatches(
      `DELETE FROM email_tokens WHERE ctid IN (
         SELECT ctid FROM email_tokens WHERE used_at IS NOT NULL OR expires_at <= $1
         LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [new Date(now)],
    );
    return { sessions, emailTokens };
  }

  function runOnce(): Promise<PruneCounts> {
    const run = (running ?? Promise.resolve()).then(
      () => prune(),
      () => prune(),
    );
    running = run.catch(() => ({ sessions: 0, emailTokens: 0 }));
    return run;
  }

  async function tick(): Promise<void> {
    try {
      const counts = await runOnce();
      options.log.info({ event: 'pruned', ...counts }, 'deleted expired sessions and email tokens');
    } catch (err) {
      // A failed run (the database away, say) is tried again at the next interval; no request depends on it.
      options.log.warn({ event: 'prune_failed', err: { message: (err as Error).message } }, 'pruning expired rows failed');
    }
    schedule();
  }

  function schedule(delayMs = options.intervalMs): void {
    if (stopped || options.intervalMs <= 0) return;
    timer = setTimeout(() => void tick(), delayMs);
    timer.unref();
  }

  schedule(Math.min(options.intervalMs, options.firstRunMaxDelayMs ?? 60_000));
  return {
    runOnce,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
