import { randomBytes } from 'node:crypto';
import type { Pool, PoolClient } from '../kit/db.js';
import type { OutgoingMail } from '../kit/mail/outbox.js';
import { secretDigest } from './sessions.js';

export type EmailTokenPurpose = 'password_reset' | 'email_verification';

/** A new token: 32 random bytes, base64url (43 characters). Only its SHA-256 is stored. */
export function newEmailToken(): string {
  return randomBytes(32).toString('base64url');
}

/** The SQL of the single-use tokens sent by mail (table email_tokens, migration 004). */
export class EmailTokens {
  constructor(private readonly pool: Pool) {}

  /**
   * Stores the token and queues its mail if the address belongs to an account
   * (for a verification: an account not yet verified), all in one statement: the
   * database does the same work whether or not the account exists, and the answer
   * is the only difference (the user's id, or undefined). The mail row has the
   * shape of the kit's outbox (src/kit/mail/migrations/001_outbox.sql); it is written here, in the
   * same statement, rather than by enqueueMail, so that no second statement runs
   * only for known addresses.
   */
  async issue(
    db: PoolClient,
    issue: { email: string; purpose: EmailTokenPurpose; token: string; now: number; ttlMs: number; mail: Omit<OutgoingMail, 'to'> },
  ): Promise<string | undefined> {
    const { rows } = await db.query<{ user_id: string }>(
      `WITH account AS (
         SELECT id, email FROM users
         WHERE lower(email) = lower($1) AND ($2 = 'password_reset' OR email_verified_at IS NULL)
       ), token AS (
         INSERT INTO email_tokens (token_hash, purpose, user_id, created_at, expires_at)
         SELECT $3, $2, id, $4, $5 FROM account RETURNING user_id
       ), mail AS (
         INSERT INTO mail_outbox (recipient, subject, text_body, html_body)
         SELECT account.email, $6, $7, $8 FROM account JOIN token ON token.user_id = account.id
       )
       SELECT user_id FROM token`,
      [
        issue.email,
        issue.purpose,
        secretDigest(issue.token),
        new Date(issue.now),
        new Date(issue.now + issue.ttlMs),
        issue.mail.subject,
        issue.mail.text,
        issue.mail.html ?? null,
      ],
    );
    return rows[0]?.user_id;
  }

  /** The user a token would act for, if it is unused and unexpired; consumes nothing. */
  async peek(token: string, purpose: EmailTokenPurpose, now: number): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ user_id: string }>(
      'SELECT user_id FROM email_tokens WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3',
      [secretDigest(token), purpose, new Date(now)],
    );
    return rows[0]?.user_id;
  }

  /**
   * Marks the token used and returns its user, if it was unused and unexpired. One
   * statement: of two transactions consuming one token, the second waits for the
   * first's row lock and then finds it used, so exactly one succeeds.
   */
  async consume(db: PoolClient, token: string, purpose: EmailTokenPurpose, now: number): Promise<string | undefined> {
    const { rows } = await db.query<{ user_id: string }>(
      `UPDATE email_tokens SET used_at = $3
       WHERE token_hash = $1 AND purpose = $2 AND used_at IS NULL AND expires_at > $3 RETURNING user_id`,
      [secretDigest(token), purpose, new Date(now)],
    );
    return rows[0]?.user_id;
  }

  /** Retires the user's other unused tokens of this purpose (a completed reset voids older links). */
  async retireAll(db: PoolClient, userId: string, purpose: EmailTokenPurpose, now: number): Promise<void> {
    await db.query('UPDATE email_tokens SET used_at = $3 WHERE user_id = $1 AND purpose = $2 AND used_at IS NULL', [
      userId,
      purpose,
      new Date(now),
    ]);
  }

  /** Records that the owner of the address proved it (kept at the first time). */
  async markEmailVerified(db: PoolClient, userId: string, now: number): Promise<void> {
    await db.query('UPDATE users SET email_verified_at = coalesce(email_verified_at, $2) WHERE id = $1', [userId, new Date(now)]);
  }
}
