import { randomBytes } from 'node:crypto';
import type { AuthenticationResponseJSON, PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server';
import type { Clock } from '../kit/clock.js';
import { type Pool, type PoolClient, withTransaction } from '../kit/db.js';
import { HttpError, badRequest, forbidden, notFound, unauthorized } from '../kit/http/errors.js';
import type { CounterStore } from '../kit/rate-limit.js';
import type { MailOutbox } from '../kit/service.js';
import { escapeHtml } from '../kit/text.js';
import type { AuditContext, AuditLog, Origin } from './audit.js';
import type { Passkeys } from './passkeys.js';
import { RECOVERY_CODE_COUNT, newRecoveryCodes, normalizeRecoveryCode, recoveryCodeHash } from './recovery-codes.js';
import type { PublicUser, UsersRepository } from './repository.js';
import { USER_NOT_FOUND } from './service.js';
import { ACCOUNT_BANNED, type Sessions, secretDigest, type TokenPair } from './sessions.js';
import { type SecretBox, base32Encode, matchingTotpStep, newTotpSecret, normalizeTotpCode, otpauthUri } from '../kit/totp.js';

/** A challenge lives this long: the time to open an authenticator app and type a code. */
export const CHALLENGE_TTL_MS = 5 * 60_000;
/** Codes tried per challenge; then the password must be given again. */
export const CHALLENGE_MAX_ATTEMPTS = 5;
/**
 * Failed factor checks per account, whatever the challenge, the address or the kind of
 * code (TOTP or recovery code share it): guesses spread over many addresses and many
 * challenges still meet this. Counted before each check.
 */
export const FACTOR_FAILURE_LIMIT = { max: 10, windowMs: 15 * 60_000 } as const;
/** A TOTP enrolment not confirmed within this is void; starting again gives a new secret. */
export const ENROLMENT_TTL_MS = 10 * 60_000;

export const INVALID_CHALLENGE = 'This sign-in challenge is invalid, used, expired or out of attempts; sign in again with your password.';
export const INVALID_FACTOR_CODE = 'Invalid code';
export const TOTP_ALREADY_ON = 'A TOTP factor is already on for this account; remove it first to enrol a new one.';
export const NO_PENDING_ENROLMENT = 'No TOTP enrolment is pending (or it expired); start one with POST /auth/factors/totp.';
export const NO_TOTP = 'This account has no TOTP factor.';
export const ONE_ANSWER = 'Give exactly one of code, recovery_code and passkey';

// Same shape as a refresh token: 32 random bytes, base64url.
const CHALLENGE_FORMAT = /^[A-Za-z0-9_-]{43}$/;

/** What POST /auth/login answers instead of a token when the account has a second factor. */
export interface FactorChallenge {
  mfa_required: true;
  /** Single use; only POST /auth/login/factor accepts it. */
  challenge: string;
  /** Seconds the challenge lives. */
  expires_in: number;
  methods: string[];
  /**
   * Only for an account with passkeys: the options of navigator.credentials.get for answering
   * with one of them (its credentials listed; the challenge is bound to this login challenge).
   */
  passkey?: PublicKeyCredentialRequestOptionsJSON;
}

export interface FactorAnswer {
  challenge: string;
  code?: string;
  recovery_code?: string;
  /** The browser's answer (PublicKeyCredential.toJSON()) to the `passkey` options of the challenge. */
  passkey?: AuthenticationResponseJSON;
}

export interface FactorStatus {
  totp: { enabled: boolean; confirmed_at: string | null };
  recovery_codes_remaining: number;
}

export function tooManyFactorFailures(seconds: number): HttpError {
  return new HttpError(429, `Too many failed second-factor checks, try again in ${seconds} seconds.`, { 'retry-after': String(seconds) });
}

/**
 * The per-account budget of failed second-factor checks (FACTOR_FAILURE_LIMIT): TOTP codes,
 * recovery codes and passkey assertions all count in it, each before it is checked.
 */
export class FactorFailureBudget {
  constructor(
    /** Where the counters live (shared by instances with REDIS_URL). */
    private readonly failures: CounterStore,
    private readonly audit: AuditLog,
    private readonly clock: Clock,
  ) {}

  /** Takes one count of the account's failure budget, or refuses with 429 when it is spent. */
  async countAhead(userId: string, ctx: AuditContext, during: string): Promise<void> {
    const limit = { key: failureKey(userId), ...FACTOR_FAILURE_LIMIT };
    const reservation = await this.failures.reserve([limit]);
    if (reservation.admitted) return;
    const seconds = Math.max(1, Math.ceil((reservation.windows[0]!.resetAt - this.clock()) / 1000));
    ctx.log.warn({ event: 'second_factor_throttled', userId, ip: ctx.ip }, 'second factor check refused: too many failures');
    await this.audit.record({ event: 'second_factor_throttled', actorId: userId, targetId: userId, origin: ctx, details: { during } });
    throw tooManyFactorFailures(seconds);
  }

  /** A success gives the account its whole budget back. */
  async reset(userId: string): Promise<void> {
    await this.failures.reset(failureKey(userId));
  }
}

/** A security notice to the account's address, sent only if the change commits; none without SMTP. */
export async function notifyUser(mail: MailOutbox | undefined, db: PoolClient, user: PublicUser, notice: Notice): Promise<void> {
  if (!mail) return;
  await mail.enqueue(db, {
    to: user.email,
    subject: notice.subject,
    text: `${notice.text}\n`,
    html: `<p>${escapeHtml(notice.text)}</p>`,
  });
}

export interface FactorsOptions {
  pool: Pool;
  users: UsersRepository;
  sessions: Sessions;
  audit: AuditLog;
  secrets: SecretBox;
  budget: FactorFailureBudget;
  /** A passkey answers the second step too. */
  passkeys: Passkeys;
  mail: MailOutbox | undefined;
  /** The name authenticator apps show beside the account. */
  issuer: string;
  clock: Clock;
}

export interface Notice {
  subject: string;
  text: string;
}

/**
 * Second factors: TOTP with its recovery codes and passkeys, the login challenge between
 * the password and the factor, and the security mails of their changes.
 */
export class Factors {
  constructor(private readonly deps: FactorsOptions) {}

  /** Whether a password login of this user needs a second step (a confirmed TOTP factor or a passkey): one query. */
  async required(db: PoolClient, userId: string): Promise<boolean> {
    const { rows } = await db.query(
      `SELECT 1 FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL
       UNION ALL SELECT 1 FROM passkeys WHERE user_id = $1 LIMIT 1`,
      [userId],
    );
    return rows.length > 0;
  }

  /**
   * A challenge for a user whose first step (password, or code or link sent by mail:
   * `firstMethod` as RFC 8176 names it) just succeeded, in the login's transaction.
   */
  async challenge(db: PoolClient, userId: string, firstMethod: 'pwd' | 'otp' = 'pwd'): Promise<FactorChallenge> {
    const token = randomBytes(32).toString('base64url');
    const now = this.deps.clock();
    const { rows } = await db.query('SELECT 1 FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL', [userId]);
    const passkey = await this.deps.passkeys.secondFactorOptions(db, userId);
    await db.query(
      `INSERT INTO login_challenges (token_hash, user_id, created_at, expires_at, first_method, passkey_challenge_hash)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [
        secretDigest(token),
        userId,
        new Date(now),
        new Date(now + CHALLENGE_TTL_MS),
        firstMethod,
        passkey ? secretDigest(passkey.challenge) : null,
      ],
    );
    const methods = [...(rows.length > 0 ? ['totp', 'recovery_code'] : []), ...(passkey ? ['passkey'] : [])];
    const answer: FactorChallenge = { mfa_required: true, challenge: token, expires_in: CHALLENGE_TTL_MS / 1000, methods };
    if (passkey) answer.passkey = passkey;
    return answer;
  }

  /**
   * The second step: one TOTP code or one recovery code for a live challenge. The
   * attempt is counted on the challenge and on the account before the code is
   * looked at, so parallel guesses cannot pass either limit.
   */
  async completeLogin(input: FactorAnswer, ctx: AuditContext): Promise<TokenPair> {
    const hasCode = typeof input.code === 'string';
    const hasRecovery = typeof input.recovery_code === 'string';
    const hasPasskey = input.passkey !== undefined;
    if ([hasCode, hasRecovery, hasPasskey].filter(Boolean).length !== 1) throw badRequest(ONE_ANSWER);
    const totp = hasCode ? normalizeTotpCode(input.code!) : undefined;
    const recovery = hasRecovery ? normalizeRecoveryCode(input.recovery_code!) : undefined;
    if (!CHALLENGE_FORMAT.test(input.challenge)) throw unauthorized(INVALID_CHALLENGE);
    const challengeHash = secretDigest(input.challenge);
    const now = this.deps.clock();
    const { rows } = await this.deps.pool.query<{ user_id: string; first_method: string; passkey_challenge_hash: Buffer | null }>(
      `UPDATE login_challenges SET attempts = attempts + 1
       WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 AND attempts < $3 RETURNING user_id, first_method, passkey_challenge_hash`,
      [challengeHash, new Date(now), CHALLENGE_MAX_ATTEMPTS],
    );
    const userId = rows[0]?.user_id;
    if (!userId) throw unauthorized(INVALID_CHALLENGE);
    const firstMethod = rows[0]!.first_method;
    await this.deps.budget.countAhead(userId, ctx, 'login');

    const method = hasCode ? 'totp' : hasRecovery ? 'recovery_code' : 'passkey';
    const outcome = await withTransaction(this.deps.pool, async (db): Promise<TokenPair | HttpError | undefined> => {
      const account = await this.deps.users.lockAccount(db, userId, 'share');
      if (!account) return unauthorized(INVALID_CHALLENGE);
      let remaining: number | undefined;
      if (method === 'totp') {
        if (totp === undefined || !(await this.spendTotp(db, userId, totp, 'confirmed'))) return undefined;
      } else if (method === 'passkey') {
        if (!(await this.deps.passkeys.checkSecondFactor(db, userId, input.passkey!, rows[0]!.passkey_challenge_hash))) return undefined;
      } else {
        if (recovery === undefined) return undefined;
        remaining = await this.spendRecoveryCode(db, userId, recovery);
        if (remaining === undefined) return undefined;
      }
      // Single use: of two right answers at once, one signs in.
      const used = await db.query('UPDATE login_challenges SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL', [
        challengeHash,
        new Date(this.deps.clock()),
      ]);
      if (used.rowCount !== 1) return unauthorized(INVALID_CHALLENGE);
      if (account.banned) return forbidden(ACCOUNT_BANNED);
      if (remaining !== undefined) {
        await this.deps.audit.record(
          { event: 'recovery_code_used', actorId: userId, targetId: userId, origin: ctx, details: { remaining: String(remaining) } },
          db,
        );
        await this.notify(db, account.user, {
          subject: 'A recovery code was used to sign in',
          text:
            `A recovery code was just used to sign in to your account; ${remaining} of ${RECOVERY_CODE_COUNT} remain unused. ` +
            'If this was not you, change your password and generate new recovery codes now.',
        });
      }
      await this.deps.audit.record(
        { event: 'login_succeeded', actorId: userId, targetId: userId, origin: ctx, details: { second_factor: method } },
        db,
      );
      // RFC 8176: otp for an app's code, hwk for a passkey (a key held by an authenticator).
      const amr =
        method === 'totp' ? [firstMethod, 'otp', 'mfa'] : method === 'passkey' ? [firstMethod, 'hwk', 'mfa'] : [firstMethod, 'mfa'];
      return this.deps.sessions.start(db, account, ctx, [...new Set(amr)]);
    });
    if (outcome === undefined) {
      ctx.log.warn({ event: 'second_factor_failed', userId, ip: ctx.ip, method }, 'second factor check failed');
      await this.deps.audit.record({
        event: 'second_factor_failed',
        actorId: userId,
        targetId: userId,
        origin: ctx,
        details: { method, during: 'login' },
      });
      throw unauthorized(INVALID_FACTOR_CODE);
    }
    if (outcome instanceof HttpError) throw outcome;
    await this.deps.budget.reset(userId);
    this.deps.mail?.wake();
    ctx.log.info({ event: 'login_succeeded', userId, ip: ctx.ip, secondFactor: method }, 'login succeeded');
    return outcome;
  }

  /** Whether the user has a confirmed factor or a passkey now (REQUIRE_ADMIN_MFA's check of admins). */
  async isOn(userId: string): Promise<boolean> {
    const { rows } = await this.deps.pool.query({
      name: 'accounts-factor-is-on',
      text: `SELECT 1 FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL
             UNION ALL SELECT 1 FROM passkeys WHERE user_id = $1 LIMIT 1`,
      values: [userId],
    });
    return rows.length > 0;
  }

  async status(userId: string): Promise<FactorStatus> {
    const { rows } = await this.deps.pool.query<{ confirmed_at: Date | null; remaining: number }>(
      `SELECT (SELECT confirmed_at FROM totp_factors WHERE user_id = $1) AS confirmed_at,
              (SELECT count(*)::int FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL) AS remaining`,
      [userId],
    );
    const confirmedAt = rows[0]?.confirmed_at ?? null;
    return {
      totp: { enabled: confirmedAt !== null, confirmed_at: confirmedAt?.toISOString() ?? null },
      recovery_codes_remaining: rows[0]?.remaining ?? 0,
    };
  }

  /**
   * Starts (or restarts) a TOTP enrolment: a new secret, stored sealed, shown this
   * once. The factor is on only after confirmEnrolment gets a code of it.
   */
  async beginEnrolment(caller: PublicUser): Promise<{ secret: string; otpauth_uri: string }> {
    const secret = newTotpSecret();
    const { rowCount } = await this.deps.pool.query(
      `INSERT INTO totp_factors (user_id, secret_sealed, created_at) VALUES ($1, $2, $3)
       ON CONFLICT (user_id) DO UPDATE SET secret_sealed = EXCLUDED.secret_sealed, created_at = EXCLUDED.created_at, last_used_step = -1
       WHERE totp_factors.confirmed_at IS NULL`,
      [caller.id, this.deps.secrets.seal(secret), new Date(this.deps.clock())],
    );
    if (rowCount !== 1) throw new HttpError(409, TOTP_ALREADY_ON);
    return { secret: base32Encode(secret), otpauth_uri: otpauthUri(secret, caller.email, this.deps.issuer) };
  }

  /** One valid code turns the pending factor on and answers with the first set of recovery codes. */
  async confirmEnrolment(caller: PublicUser, code: string, ctx: AuditContext): Promise<{ recovery_codes: string[] }> {
    const userId = caller.id;
    const digits = normalizeTotpCode(code);
    await this.deps.budget.countAhead(userId, ctx, 'enrolment');
    const outcome = await withTransaction(this.deps.pool, async (db): Promise<string[] | HttpError | undefined> => {
      const { rows } = await db.query<{ created_at: Date }>(
        'SELECT created_at FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NULL FOR UPDATE',
        [userId],
      );
      const pending = rows[0];
      if (!pending || this.deps.clock() - pending.created_at.getTime() > ENROLMENT_TTL_MS) return badRequest(NO_PENDING_ENROLMENT);
      if (digits === undefined || !(await this.spendTotp(db, userId, digits, 'pending'))) return undefined;
      await db.query('UPDATE totp_factors SET confirmed_at = $2 WHERE user_id = $1', [userId, new Date(this.deps.clock())]);
      const codes = await this.replaceRecoveryCodes(db, userId);
      await this.deps.audit.record(
        { event: 'factor_added', actorId: userId, targetId: userId, origin: ctx, details: { factor: 'totp' } },
        db,
      );
      await this.notify(db, caller, {
        subject: 'Two-step sign-in is on',
        text: 'An authenticator app was added to your account: signing in now asks for its code after the password. If this was not you, contact us at once.',
      });
      return codes;
    });
    if (outcome === undefined) {
      await this.deps.audit.record({
        event: 'second_factor_failed',
        actorId: userId,
        targetId: userId,
        origin: ctx,
        details: { method: 'totp', during: 'enrolment' },
      });
      throw badRequest(INVALID_FACTOR_CODE);
    }
    if (outcome instanceof HttpError) throw outcome;
    await this.deps.budget.reset(userId);
    this.deps.mail?.wake();
    return { recovery_codes: outcome };
  }

  /** Turns TOTP off; its recovery codes go with it. */
  async removeTotp(caller: PublicUser, ctx: AuditContext): Promise<void> {
    const userId = caller.id;
    await withTransaction(this.deps.pool, async (db) => {
      const { rowCount } = await db.query('DELETE FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL', [userId]);
      if (rowCount !== 1) throw notFound(NO_TOTP);
      await db.query('DELETE FROM recovery_codes WHERE user_id = $1', [userId]);
      await this.deps.audit.record(
        { event: 'factor_removed', actorId: userId, targetId: userId, origin: ctx, details: { factor: 'totp' } },
        db,
      );
      await this.notify(db, caller, {
        subject: 'Two-step sign-in is off',
        text: 'The authenticator app was removed from your account: signing in now needs the password only. If this was not you, change your password at once.',
      });
    });
    this.deps.mail?.wake();
  }

  /**
   * An admin turns off the user's two-step sign-in (a lost phone and lost codes): the
   * TOTP factor and the recovery codes go. When a factor was on,
   * the user's sessions end and their access tokens stop working (they were proved with
   * the factor that is gone), and the change is audited and mailed, in one transaction.
   * A user without a factor: nothing changes and nothing is written; false.
   */
  async resetByAdmin(actorId: string, targetId: string, origin: Origin): Promise<boolean> {
    const reset = await withTransaction(this.deps.pool, async (db) => {
      const target = await this.deps.users.lockAccount(db, targetId, 'update');
      if (!target) throw notFound(USER_NOT_FOUND);
      // A pending enrolment is not a factor (login does not ask for it): it is left to its user.
      const totp = await db.query('DELETE FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL', [targetId]);
      const codes = await db.query('DELETE FROM recovery_codes WHERE user_id = $1', [targetId]);
      // Passkeys are second factors too: a user who lost them all is let in by the password again.
      const passkeys = await db.query('DELETE FROM passkeys WHERE user_id = $1', [targetId]);
      if (totp.rowCount === 0 && codes.rowCount === 0 && passkeys.rowCount === 0) return false;
      await this.deps.sessions.revokeEverything(db, targetId, 'factors_reset');
      const details: Record<string, string> = { factor: 'totp' };
      if (passkeys.rowCount) details.passkeys_removed = String(passkeys.rowCount);
      await this.deps.audit.record({ event: 'factors_reset', actorId, targetId, origin, details }, db);
      await this.notify(db, target.user, {
        subject: 'Two-step sign-in was turned off by an administrator',
        text:
          'An administrator turned off two-step sign-in for your account: the authenticator app, the recovery codes and any passkeys no longer work, ' +
          'and signing in now needs the password only. You were signed out everywhere. ' +
          'You can turn two-step sign-in on again at any time. If you did not ask for this, change your password at once.',
      });
      return true;
    });
    if (reset) this.deps.mail?.wake();
    return reset;
  }

  /** A new set of recovery codes; the old set stops working. */
  async regenerateRecoveryCodes(caller: PublicUser, ctx: AuditContext): Promise<{ recovery_codes: string[] }> {
    const userId = caller.id;
    const codes = await withTransaction(this.deps.pool, async (db) => {
      const { rows } = await db.query('SELECT 1 FROM totp_factors WHERE user_id = $1 AND confirmed_at IS NOT NULL FOR UPDATE', [userId]);
      if (!rows[0]) throw notFound(NO_TOTP);
      const fresh = await this.replaceRecoveryCodes(db, userId);
      await this.deps.audit.record({ event: 'recovery_codes_regenerated', actorId: userId, targetId: userId, origin: ctx }, db);
      await this.notify(db, caller, {
        subject: 'New recovery codes',
        text: 'A new set of recovery codes was made for your account; the previous codes no longer work. If this was not you, change your password at once.',
      });
      return fresh;
    });
    this.deps.mail?.wake();
    return { recovery_codes: codes };
  }

  /**
   * Whether the code is right for the user's (confirmed or pending) TOTP secret and
   * of a time step later than any used before; the step is then recorded, so the
   * same code (or an older one) is refused from now on.
   */
  private async spendTotp(db: PoolClient, userId: string, code: string, state: 'confirmed' | 'pending'): Promise<boolean> {
    const { rows } = await db.query<{ secret_sealed: Buffer; last_used_step: string }>(
      `SELECT secret_sealed, last_used_step FROM totp_factors
       WHERE user_id = $1 AND confirmed_at IS ${state === 'confirmed' ? 'NOT NULL' : 'NULL'} FOR UPDATE`,
      [userId],
    );
    const row = rows[0];
    if (!row) return false;
    const step = matchingTotpStep(this.deps.secrets.open(row.secret_sealed), code, this.deps.clock());
    if (step === undefined || step <= Number(row.last_used_step)) return false;
    await db.query('UPDATE totp_factors SET last_used_step = $2 WHERE user_id = $1', [userId, step]);
    return true;
  }

  /** Spends one recovery code; the number left, or undefined when the code is not an unused one of the user's. */
  private async spendRecoveryCode(db: PoolClient, userId: string, normalized: string): Promise<number | undefined> {
    const spent = await db.query('UPDATE recovery_codes SET used_at = $3 WHERE user_id = $1 AND code_hash = $2 AND used_at IS NULL', [
      userId,
      recoveryCodeHash(normalized),
      new Date(this.deps.clock()),
    ]);
    if (spent.rowCount !== 1) return undefined;
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM recovery_codes WHERE user_id = $1 AND used_at IS NULL', [
      userId,
    ]);
    return rows[0]!.n;
  }

  private async replaceRecoveryCodes(db: PoolClient, userId: string): Promise<string[]> {
    const codes = newRecoveryCodes();
    await db.query('DELETE FROM recovery_codes WHERE user_id = $1', [userId]);
    await db.query(`INSERT INTO recovery_codes (user_id, code_hash, created_at) SELECT $1, hash, $3 FROM unnest($2::bytea[]) AS hash`, [
      userId,
      codes.map((code) => recoveryCodeHash(normalizeRecoveryCode(code)!)),
      new Date(this.deps.clock()),
    ]);
    return codes;
  }

  private async notify(db: PoolClient, user: PublicUser, notice: Notice): Promise<void> {
    await notifyUser(this.deps.mail, db, user, notice);
  }
}

const failureKey = (userId: string) => `account:${userId}`;
