import { randomUUID } from 'node:crypto';
import { type Pool, isUniqueViolation, withTransaction } from '../../../kit/db.js';
import { SESSION_COLUMNS, type SessionRow } from './sessions.js';
import type { FactorRow } from '../user.js';

// The SQL of multi-factor authentication (GoTrue's mfa_factors, mfa_challenges, mfa_amr_claims).
// Runs on the admin pool, as the rest of the auth schema; times come from the injected clock.

/** A factor with what verifying needs (its sealed secret and the last time step accepted). */
export interface FactorRecord {
  id: string;
  user_id: string;
  friendly_name: string | null;
  factor_type: string;
  status: 'verified' | 'unverified';
  secret: string;
  last_totp_step: string | null;
}

export interface ChallengeRecord {
  id: string;
  factor_id: string;
  created_at: Date;
  verified_at: Date | null;
  ip_address: string;
}

/** What enrolment checks under the lock on the user: the user's current factors. */
export type EnrolRule = (factors: { friendly_name: string | null; status: string }[]) => void;

/** Why a verified code still did not raise the session. */
export type VerifyOutcome =
  | { kind: 'verified'; session: SessionRow }
  | { kind: 'challenge_used' }
  | { kind: 'replayed' }
  | { kind: 'session_gone' };

/** Rolls back a verification refused part-way. */
class Refused extends Error {
  constructor(readonly outcome: VerifyOutcome) {
    super(outcome.kind);
  }
}

const FACTOR_COLUMNS = 'id, user_id, friendly_name, factor_type, status, secret, last_totp_step::text AS last_totp_step';

export class MfaStore {
  constructor(private readonly pool: Pool) {}

  /**
   * A new unverified TOTP factor, under a lock on the user so that concurrent enrolments see each
   * other: `check` sees the user's factors (after expired unverified ones are gone) and throws to
   * refuse. Undefined when the friendly name was taken meanwhile.
   */
  async enrol(
    factor: { userId: string; friendlyName: string; sealedSecret: string; now: Date; unverifiedExpiresBefore: Date },
    check: EnrolRule,
  ): Promise<FactorRow | undefined> {
    try {
      return await withTransaction(this.pool, async (client) => {
        await client.query('SELECT 1 FROM auth.users WHERE id = $1 FOR UPDATE', [factor.userId]);
        // GoTrue's DeleteExpiredFactors: unverified, never challenged, older than the factor expiry.
        await client.query(
          `DELETE FROM auth.mfa_factors f WHERE f.user_id = $1 AND f.status <> 'verified' AND f.created_at < $2
             AND NOT EXISTS (SELECT 1 FROM auth.mfa_challenges c WHERE c.factor_id = f.id)`,
          [factor.userId, factor.unverifiedExpiresBefore],
        );
        const existing = await client.query<{ friendly_name: string | null; status: string }>(
          'SELECT friendly_name, status FROM auth.mfa_factors WHERE user_id = $1',
          [factor.userId],
        );
        check(existing.rows);
        const { rows } = await client.query<FactorRow>(
          `INSERT INTO auth.mfa_factors (id, user_id, friendly_name, factor_type, status, created_at, updated_at, secret)
           VALUES ($1, $2, $3, 'totp', 'unverified', $4, $4, $5)
           RETURNING id, friendly_name, factor_type, status, created_at, updated_at, last_challenged_at`,
          [randomUUID(), factor.userId, factor.friendlyName, factor.now, factor.sealedSecret],
        );
        return rows[0]!;
      });
    } catch (err) {
      if (isUniqueViolation(err, 'mfa_factors_user_friendly_name_unique')) return undefined;
      throw err;
    }
  }

  /** The user's factor `factorId`, or undefined (someone else's factor is not found either). */
  async findOwnedFactor(userId: string, factorId: string): Promise<FactorRecord | undefined> {
    const { rows } = await this.pool.query<FactorRecord>(`SELECT ${FACTOR_COLUMNS} FROM auth.mfa_factors WHERE id = $1 AND user_id = $2`, [
      factorId,
      userId,
    ]);
    return rows[0];
  }

  /** A new challenge from `ip`; the factor's expired challenges go, and its last_challenged_at moves. */
  async createChallenge(factorId: string, ip: string, now: Date, expiredBefore: Date): Promise<ChallengeRecord> {
    return withTransaction(this.pool, async (client) => {
      await client.query('DELETE FROM auth.mfa_challenges WHERE factor_id = $1 AND created_at < $2', [factorId, expiredBefore]);
      const { rows } = await client.query<ChallengeRecord>(
        `INSERT INTO auth.mfa_challenges (id, factor_id, created_at, ip_address) VALUES ($1, $2, $3, $4)
         RETURNING id, factor_id, created_at, verified_at, host(ip_address) AS ip_address`,
        [randomUUID(), factorId, now, ip],
      );
      await client.query('UPDATE auth.mfa_factors SET last_challenged_at = $2 WHERE id = $1', [factorId, now]);
      return rows[0]!;
    });
  }

  /** The factor's challenge `challengeId`; `same_ip`: it was issued to `ip`. */
  async findChallenge(factorId: string, challengeId: string, ip: string): Promise<(ChallengeRecord & { same_ip: boolean }) | undefined> {
    const { rows } = await this.pool.query<ChallengeRecord & { same_ip: boolean }>(
      `SELECT id, factor_id, created_at, verified_at, host(ip_address) AS ip_address, ip_address = $3::inet AS same_ip
         FROM auth.mfa_challenges WHERE id = $1 AND factor_id = $2`,
      [challengeId, factorId, ip],
    );
    return rows[0];
  }

  async deleteChallenge(challengeId: string): Promise<void> {
    await this.pool.query('DELETE FROM auth.mfa_challenges WHERE id = $1', [challengeId]);
  }

  /**
   * A correct code of time step `step`: in one transaction, the challenge is used (once), the
   * factor verified and its step recorded (only a later step than the last one accepted: a replayed
   * code changes nothing), the session raised to aal2 with a `totp` claim and given a new refresh
   * token (the aal1 ones are deleted: they cannot refresh into the aal2 session), the user's aal1
   * sessions ended and their other unverified TOTP factors removed, as GoTrue's verifyTOTPFactor.
   */
  async completeVerification(v: {
    userId: string;
    sessionId: string;
    factorId: string;
    challengeId: string;
    step: number;
    refreshTokenHash: string;
    now: Date;
  }): Promise<VerifyOutcome> {
    try {
      return await withTransaction(this.pool, async (client) => {
        const locked = await client.query('SELECT 1 FROM auth.sessions WHERE id = $1 AND user_id = $2 FOR UPDATE', [v.sessionId, v.userId]);
        if (locked.rowCount === 0) throw new Refused({ kind: 'session_gone' });
        const used = await client.query(
          'UPDATE auth.mfa_challenges SET verified_at = $2 WHERE id = $1 AND factor_id = $3 AND verified_at IS NULL',
          [v.challengeId, v.now, v.factorId],
        );
        if (used.rowCount === 0) throw new Refused({ kind: 'challenge_used' });
        const stepped = await client.query(
          `UPDATE auth.mfa_factors SET last_totp_step = $2, status = 'verified', updated_at = $3
           WHERE id = $1 AND (last_totp_step IS NULL OR last_totp_step < $2)`,
          [v.factorId, v.step, v.now],
        );
        if (stepped.rowCount === 0) throw new Refused({ kind: 'replayed' });
        await client.query(
          `INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method) VALUES ($1, $2, $2, 'totp')
           ON CONFLICT ON CONSTRAINT mfa_amr_claims_session_id_authentication_method_pkey DO UPDATE SET updated_at = $2`,
          [v.sessionId, v.now],
        );
        await client.query(`UPDATE auth.sessions SET aal = 'aal2', factor_id = $2, updated_at = $3 WHERE id = $1`, [
          v.sessionId,
          v.factorId,
          v.now,
        ]);
        await client.query('DELETE FROM auth.refresh_tokens WHERE session_id = $1', [v.sessionId]);
        await client.query(
          'INSERT INTO auth.refresh_tokens (token, user_id, session_id, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)',
          [v.refreshTokenHash, v.userId, v.sessionId, v.now],
        );
        await client.query(`DELETE FROM auth.sessions WHERE user_id = $1 AND aal < 'aal2'`, [v.userId]);
        await client.query(`DELETE FROM auth.mfa_factors WHERE user_id = $1 AND status = 'unverified' AND factor_type = 'totp'`, [
          v.userId,
        ]);
        const { rows } = await client.query<SessionRow>(`SELECT ${SESSION_COLUMNS} FROM auth.sessions s WHERE s.id = $1`, [v.sessionId]);
        return { kind: 'verified', session: rows[0]! };
      });
    } catch (err) {
      if (err instanceof Refused) return err.outcome;
      throw err;
    }
  }

  /**
   * Removes a factor (its challenges follow) and lowers the sessions it raised back to aal1 without
   * their `totp` claim (GoTrue's DowngradeSessionsToAAL1). The factor as it was, or undefined.
   */
  async deleteFactor(userId: string, factorId: string, now: Date): Promise<FactorRow | undefined> {
    return withTransaction(this.pool, async (client) => {
      const { rows } = await client.query<FactorRow>(
        `DELETE FROM auth.mfa_factors WHERE id = $1 AND user_id = $2
         RETURNING id, friendly_name, factor_type, status, created_at, updated_at, last_challenged_at`,
        [factorId, userId],
      );
      if (rows.length === 0) return undefined;
      await client.query(
        `DELETE FROM auth.mfa_amr_claims WHERE authentication_method = 'totp'
           AND session_id IN (SELECT id FROM auth.sessions WHERE factor_id = $1)`,
        [factorId],
      );
      await client.query(`UPDATE auth.sessions SET aal = 'aal1', factor_id = NULL, updated_at = $2 WHERE factor_id = $1`, [factorId, now]);
      return rows[0];
    });
  }
}
