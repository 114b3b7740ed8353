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
  /** Second-factor login challenges used or expired. */
  loginChallenges: number;
  /** Passkey registration and sign-in challenges used or expired. */
  passkeyChallenges: number;
}

export interface PrunerOptions {
  pool: Pool;
  clock: Clock;
  /** A session unused this long, or this old, can never be used again (SESSION_IDLE_TIMEOUT, SESSION_MAX_LIFETIME). */
  idleMs: number;
  maxLifetimeMs: number;
  batchSize?: number;
  maxBatches?: number;
}

export interface Pruner {
  /** One run (runs never overlap); resolves with what it deleted. */
  runOnce(): Promise<PruneCounts>;
  /** No statement starts after this; a run in progress ends after its current statement. */
  stop(): void;
}

/**
 * Deletes what can never be used again: sessions ended, idle-expired or past
 * their lifetime for longer than ENDED_SESSION_RETENTION_MS, and email tokens
 * and second-factor login and passkey challenges used or expired (a deleted one answers exactly as a used one did). The audit
 * log is never pruned: it is append-only by design (migration 002).
 *
 * Each statement deletes at most batchSize rows and skips rows another
 * transaction holds (a refresh, or another instance's prune), so several
 * instances may run at once: each row is deleted once, nobody waits. The app
 * runs it every PRUNE_INTERVAL as a periodic job (app.ts).
 */
export function createPruner(options: PrunerOptions): Pruner {
  const batchSize = options.batchSize ?? PRUNE_BATCH_SIZE;
  const maxBatches = options.maxBatches ?? PRUNE_MAX_BATCHES;
  let stopped = false;
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
    const loginChallenges = await deleteInBatches(
      `DELETE FROM login_challenges WHERE ctid IN (
         SELECT ctid FROM login_challenges WHERE used_at IS NOT NULL OR expires_at <= $1
         LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [new Date(now)],
    );
    const passkeyChallenges = await deleteInBatches(
      `DELETE FROM passkey_challenges WHERE ctid IN (
         SELECT ctid FROM passkey_challenges WHERE used_at IS NOT NULL OR expires_at <= $1
         LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [new Date(now)],
    );
    return { sessions, emailTokens, loginChallenges, passkeyChallenges };
  }

  return {
    runOnce() {
      const run = (running ?? Promise.resolve()).then(
        () => prune(),
        () => prune(),
      );
      running = run.catch(() => ({ sessions: 0, emailTokens: 0, loginChallenges: 0, passkeyChallenges: 0 }));
      return run;
    },
    stop() {
      stopped = true;
    },
  };
}
