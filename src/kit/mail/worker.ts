import type { Logger } from 'pino';
import type { Pool } from '../db.js';
import type { MailTransport } from './transport.js';

export interface MailWorkerOptions {
  pool: Pool;
  transport: MailTransport;
  /** The From header (MAIL_FROM). */
  from: string;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
  /** How often the outbox is checked when nothing woke the worker (mail queued by another instance). */
  pollIntervalMs?: number;
  /** Delay before the second attempt; it doubles each time, up to retryMaxMs. */
  retryBaseMs?: number;
  retryMaxMs?: number;
  /** Attempts before a mail is given up (marked failed, logged at error). */
  maxAttempts?: number;
  /**
   * How long a claimed mail is reserved for the worker sending it. It must exceed one
   * SMTP exchange (its timeouts): a worker that dies mid-send leaves the mail to
   * another after this.
   */
  leaseMs?: number;
  /** On stop, how long due mail is still sent before the worker gives up; what is left stays queued. */
  drainMs?: number;
}

export interface MailWorker {
  /** Looks at the outbox now (after a commit that queued mail) instead of at the next poll. */
  wake(): void;
  /** Sends what is due within drainMs, then stops; the transport is closed. */
  stop(): Promise<void>;
}

export const MAIL_WORKER_DEFAULTS = {
  pollIntervalMs: 2000,
  retryBaseMs: 5000,
  retryMaxMs: 10 * 60_000,
  // 5 s, 10 s, 20 s … capped at 10 min: about an hour and a half of outage before giving up.
  maxAttempts: 15,
  leaseMs: 2 * 60_000,
  drainMs: 5000,
};

interface ClaimedMail {
  id: number;
  recipient: string;
  subject: string;
  text_body: string;
  html_body: string | null;
  attempts: number;
}

/** The backoff before attempt number `attempts + 1`, after `attempts` failed ones. */
export function retryDelayMs(attempts: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));
}

/**
 * A permanent refusal: the server answered 5xx (no such mailbox, message refused).
 * Retrying would get the same answer; anything else (connection refused, timeout,
 * 4xx) may pass later.
 */
function isPermanent(err: unknown): boolean {
  const code = (err as { responseCode?: number }).responseCode;
  return typeof code === 'number' && code >= 500 && code < 600;
}

/**
 * What a failure is recorded and logged as: the SMTP command, reply code and error
 * code only. The server's own text may quote the recipient, and the mail's
 * body (its link) is never logged.
 */
function describeFailure(err: unknown): string {
  const e = err as { code?: string; responseCode?: number; command?: string };
  return [e.command, e.responseCode, e.code].filter((part) => part !== undefined).join(' ') || 'unknown error';
}

/**
 * Sends the mail of a service's outbox. Several instances may run against one
 * database: a mail is claimed by a single statement that skips rows another
 * worker holds (FOR UPDATE SKIP LOCKED) and moves the mail a lease ahead, so no
 * two workers send it. A failed attempt is retried after an exponential backoff,
 * at most maxAttempts times. An SMTP outage therefore delays mail and never
 * loses it, and never fails the request that queued it.
 */
export function startMailWorker(options: MailWorkerOptions): MailWorker {
  const opts = { ...MAIL_WORKER_DEFAULTS, ...options };
  const { pool, transport, log } = opts;
  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let wakeAgain = false;
  let stopped: Promise<void> | undefined;

  async function claim(): Promise<ClaimedMail | undefined> {
    const { rows } = await pool.query<ClaimedMail>(
      `UPDATE mail_outbox SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $1::double precision / 1000)
       WHERE id = (
         SELECT id FROM mail_outbox WHERE failed_at IS NULL AND next_attempt_at <= now()
         ORDER BY next_attempt_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
       RETURNING id, recipient, subject, text_body, html_body, attempts`,
      [opts.leaseMs],
    );
    return rows[0];
  }

  async function sendOne(mail: ClaimedMail): Promise<void> {
    try {
      await transport.sendMail({
        from: opts.from,
        to: mail.recipient,
        subject: mail.subject,
        text: mail.text_body,
        html: mail.html_body ?? undefined,
      });
    } catch (err) {
      const reason = describeFailure(err);
      if (isPermanent(err) || mail.attempts >= opts.maxAttempts) {
        await pool.query(`UPDATE mail_outbox SET failed_at = now(), last_error = $2, text_body = '', html_body = NULL WHERE id = $1`, [
          mail.id,
          reason,
        ]);
        log.error({ event: 'mail_failed', mailId: mail.id, attempts: mail.attempts, reason }, 'mail given up');
      } else {
        const delay = retryDelayMs(mail.attempts, opts.retryBaseMs, opts.retryMaxMs);
        await pool.query(
          `UPDATE mail_outbox SET next_attempt_at = now() + make_interval(secs => $2::double precision / 1000), last_error = $3 WHERE id = $1`,
          [mail.id, delay, reason],
        );
        log.warn({ event: 'mail_retry', mailId: mail.id, attempts: mail.attempts, retryInMs: delay, reason }, 'mail not sent, will retry');
      }
      return;
    }
    await pool.query('DELETE FROM mail_outbox WHERE id = $1', [mail.id]);
    log.info({ event: 'mail_sent', mailId: mail.id, attempts: mail.attempts }, 'mail sent');
  }

  /** Sends due mail until none is left (or the deadline passes). */
  async function sendDue(deadline = Number.POSITIVE_INFINITY): Promise<void> {
    while (Date.now() < deadline) {
      const mail = await claim();
      if (!mail) return;
      await sendOne(mail);
    }
  }

  function schedule(delayMs: number): void {
    if (stopping) return;
    clearTimeout(timer);
    timer = setTimeout(run, delayMs);
    timer.unref();
  }

  function run(): void {
    if (running) {
      // A wake during a round: look again right after it, for mail it may have missed.
      wakeAgain = true;
      return;
    }
    wakeAgain = false;
    running = sendDue()
      .catch((err: unknown) => {
        // The database is down or slow: the mail stays queued, the next round retries.
        log.warn(
          { event: 'mail_worker_error', reason: (err as { code?: string }).code ?? (err as Error).message },
          'mail outbox not readable',
        );
      })
      .finally(() => {
        running = undefined;
        schedule(wakeAgain ? 0 : opts.pollIntervalMs);
      });
  }

  schedule(0);

  return {
    wake() {
      if (!stopping) schedule(0);
    },
    stop() {
      stopping = true;
      clearTimeout(timer);
      stopped ??= (async () => {
        await running;
        try {
          await sendDue(Date.now() + opts.drainMs);
        } catch (err) {
          log.warn(
            { event: 'mail_worker_error', reason: (err as { code?: string }).code ?? (err as Error).message },
            'mail not drained on stop',
          );
        }
        transport.close();
      })();
      return stopped;
    },
  };
}
