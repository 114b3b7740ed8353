import {
  type AuthenticationResponseJSON,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
} from '@simplewebauthn/server';
import type { Ipv6Prefixes } from '../kit/http/client-ip.js';
import type { Clock } from '../kit/clock.js';
import { type Pool, type PoolClient, isUniqueViolation, withTransaction } from '../kit/db.js';
import { HttpError, badRequest, forbidden, notFound, unauthorized } from '../kit/http/errors.js';
import type { FixedWindowLimiter } from '../kit/rate-limit.js';
import type { MailOutbox } from '../kit/service.js';
import type { AuditContext, AuditLog } from './audit.js';
import { type FactorFailureBudget, notifyUser } from './factors.js';
import type { PublicUser, UsersRepository } from './repository.js';
import { ACCOUNT_BANNED, type Sessions, secretDigest, type TokenPair } from './sessions.js';
import { characterCount, invalidField } from './validation.js';

/** A passkey challenge (registration, or sign-in with a passkey alone) lives this long. */
export const PASSKEY_CHALLENGE_TTL_MS = 5 * 60_000;
/** Passkeys per account: enough for every device and a spare key, and a bounded list to send at sign-in. */
export const MAX_PASSKEYS = 20;
export const PASSKEY_NAME_MAX = 64;

/**
 * How a sign-in with a passkey alone is named in the token's amr (RFC 8176): hwk, proof of
 * possession of a key held by an authenticator; mfa, because the authenticator also verified
 * the user (PIN or biometric, required for this sign-in): something had and something known or
 * been, two factors (aal2).
 */
export const PASSKEY_SIGN_IN_AMR = ['hwk', 'mfa'];

export const INVALID_PASSKEY_SIGN_IN = 'This passkey sign-in is invalid, used, expired or not recognised; start again.';
export const INVALID_REGISTRATION_CHALLENGE = 'This passkey registration is invalid, used or expired; start again.';
export const PASSKEY_NOT_VERIFIED = 'The passkey’s answer could not be verified.';
export const PASSKEY_ALREADY_REGISTERED = 'This passkey is already registered.';
export const TOO_MANY_PASSKEYS = `An account holds at most ${MAX_PASSKEYS} passkeys; remove one first.`;
export const PASSKEY_NOT_FOUND = 'Passkey not found';

export function tooManyPasskeySignIns(seconds: number): HttpError {
  return new HttpError(429, `Too many passkey sign-ins from this address, try again in ${seconds} seconds.`, {
    'retry-after': String(seconds),
  });
}

/** What the API shows of a passkey: never its key or credential id. */
export interface PasskeyView {
  id: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
}

export interface PasskeysOptions {
  pool: Pool;
  users: UsersRepository;
  sessions: Sessions;
  audit: AuditLog;
  /** The per-account failure budget of second-factor checks, which passkey assertions share. */
  budget: FactorFailureBudget;
  mail: MailOutbox | undefined;
  /** The WebAuthn relying party: its id (a host name) and the origin pages run at, both from ACCOUNTS_PUBLIC_URL. */
  rpId: string;
  origin: string;
  rpName: string;
  /** Sign-in options per client address: each one stores a challenge. */
  signInOptions: FixedWindowLimiter;
  ipv6: Ipv6Prefixes;
  clock: Clock;
}

interface StoredPasskey {
  id: string;
  user_id: string;
  credential_id: string;
  public_key: Buffer;
  counter: string;
  transports: string[];
}

/**
 * The challenge inside a browser's answer (clientDataJSON), by which the stored challenge is
 * found; the library checks it again against what is returned here. Undefined when unreadable.
 */
export function signedChallenge(clientDataJSON: unknown): string | undefined {
  if (typeof clientDataJSON !== 'string' || clientDataJSON.length > 4096) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(clientDataJSON, 'base64url').toString('utf8')) as { challenge?: unknown };
    return typeof parsed.challenge === 'string' && /^[A-Za-z0-9_-]{16,128}$/.test(parsed.challenge) ? parsed.challenge : undefined;
  } catch {
    return undefined;
  }
}

/** A passkey's name, trimmed: 1 to 64 characters, no control characters. */
export function checkPasskeyName(raw: string): string {
  const name = raw.trim();
  const length = characterCount(name);
  if (length < 1 || length > PASSKEY_NAME_MAX) throw invalidField('name', `must be between 1 and ${PASSKEY_NAME_MAX} characters`);
  if (/\p{Cc}/u.test(name)) throw invalidField('name', 'must not contain control characters');
  return name;
}

/**
 * Passkeys (WebAuthn, through @simplewebauthn/server): registration by a signed-in user,
 * sign-in with a discoverable credential alone, and the check of a passkey answering the
 * second step of a password sign-in (for Factors).
 */
export class Passkeys {
  constructor(private readonly deps: PasskeysOptions) {}

  async list(userId: string): Promise<PasskeyView[]> {
    const { rows } = await this.deps.pool.query<{ id: string; name: string; created_at: Date; last_used_at: Date | null }>(
      'SELECT id, name, created_at, last_used_at FROM passkeys WHERE user_id = $1 ORDER BY created_at, id',
      [userId],
    );
    return rows.map(view);
  }

  /**
   * The options for navigator.credentials.create: a discoverable credential (so it can sign in
   * without an email), the user's passkeys excluded. Its challenge replaces any earlier unused
   * one of the user: one registration at a time.
   */
  async registrationOptions(caller: PublicUser): Promise<PublicKeyCredentialCreationOptionsJSON> {
    const existing = await this.deps.pool.query<{ credential_id: string; transports: string[] }>(
      'SELECT credential_id, transports FROM passkeys WHERE user_id = $1',
      [caller.id],
    );
    if (existing.rows.length >= MAX_PASSKEYS) throw new HttpError(409, TOO_MANY_PASSKEYS);
    const options = await generateRegistrationOptions({
      rpName: this.deps.rpName,
      rpID: this.deps.rpId,
      userName: caller.email,
      userDisplayName: caller.name,
      // The user handle a discoverable credential returns at sign-in: the account's id, no personal data.
      userID: new TextEncoder().encode(caller.id),
      timeout: PASSKEY_CHALLENGE_TTL_MS,
      attestationType: 'none',
      excludeCredentials: existing.rows.map((row) => ({ id: row.credential_id, transports: row.transports })),
      authenticatorSelection: { residentKey: 'required', userVerification: 'preferred' },
    });
    const now = this.deps.clock();
    await withTransaction(this.deps.pool, async (db) => {
      await db.query(`DELETE FROM passkey_challenges WHERE user_id = $1 AND purpose = 'registration'`, [caller.id]);
      await db.query(
        `INSERT INTO passkey_challenges (challenge_hash, purpose, user_id, created_at, expires_at) VALUES ($1, 'registration', $2, $3, $4)`,
        [secretDigest(options.challenge), caller.id, new Date(now), new Date(now + PASSKEY_CHALLENGE_TTL_MS)],
      );
    });
    return options;
  }

  /**
   * The browser's answer to the registration options: the challenge (the caller's, live, unused)
   * is spent first, whatever the outcome; then the attestation is verified and the passkey stored,
   * audited and mailed in one transaction.
   */
  async register(caller: PublicUser, input: { name: string; response: RegistrationResponseJSON }, ctx: AuditContext): Promise<PasskeyView> {
    const name = checkPasskeyName(input.name);
    const challenge = signedChallenge(input.response.response.clientDataJSON);
    if (!challenge) throw badRequest(PASSKEY_NOT_VERIFIED);
    const now = this.deps.clock();
    const spent = await this.deps.pool.query(
      `UPDATE passkey_challenges SET used_at = $3
       WHERE challenge_hash = $1 AND purpose = 'registration' AND user_id = $2 AND used_at IS NULL AND expires_at > $3`,
      [secretDigest(challenge), caller.id, new Date(now)],
    );
    if (spent.rowCount !== 1) throw badRequest(INVALID_REGISTRATION_CHALLENGE);
    let credential: { id: string; publicKey: Uint8Array; counter: number; transports?: string[] };
    try {
      const verified = await verifyRegistrationResponse({
        response: input.response,
        expectedChallenge: challenge,
        expectedOrigin: this.deps.origin,
        expectedRPID: this.deps.rpId,
        requireUserVerification: false,
      });
      if (!verified.verified) throw new Error('not verified');
      credential = verified.registrationInfo.credential;
    } catch (err) {
      // The library's words without the values it quotes (challenges, origins sent by the client).
      const reason = (err as Error).message.replace(/"[^"]*"/g, '"…"').slice(0, 200);
      ctx.log.warn({ event: 'passkey_registration_failed', userId: caller.id, reason }, 'passkey not registered');
      throw badRequest(PASSKEY_NOT_VERIFIED);
    }
    const transports = (input.response.response.transports ?? []).filter((t) => /^[a-z-]{1,32}$/.test(t)).slice(0, 8);
    const added = await withTransaction(this.deps.pool, async (db) => {
      const account = await this.deps.users.lockAccount(db, caller.id, 'update');
      if (!account) throw unauthorized('Invalid or expired token.');
      const { rows: counted } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM passkeys WHERE user_id = $1', [caller.id]);
      if (counted[0]!.n >= MAX_PASSKEYS) throw new HttpError(409, TOO_MANY_PASSKEYS);
      let row: { id: string; name: string; created_at: Date; last_used_at: Date | null };
      try {
        const { rows } = await db.query<typeof row>(
          `INSERT INTO passkeys (user_id, credential_id, public_key, counter, transports, name, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, name, created_at, last_used_at`,
          [caller.id, credential.id, Buffer.from(credential.publicKey), credential.counter, transports, name, new Date(now)],
        );
        row = rows[0]!;
      } catch (err) {
        if (isUniqueViolation(err)) throw new HttpError(409, PASSKEY_ALREADY_REGISTERED);
        throw err;
      }
      await this.deps.audit.record(
        { event: 'passkey_added', actorId: caller.id, targetId: caller.id, origin: ctx, details: { passkey_id: row.id, name } },
        db,
      );
      await notifyUser(this.deps.mail, db, account.user, {
        subject: 'A passkey was added',
        text:
          `A passkey named "${name}" was added to your account: it can now sign you in without a password, ` +
          'and it answers the second step of a password sign-in. If this was not you, remove it and change your password at once.',
      });
      return view(row);
    });
    this.deps.mail?.wake();
    ctx.log.info({ event: 'passkey_added', userId: caller.id, passkeyId: added.id }, 'passkey added');
    return added;
  }

  async rename(callerId: string, passkeyId: string, rawName: string): Promise<PasskeyView> {
    const name = checkPasskeyName(rawName);
    const { rows } = await this.deps.pool.query<{ id: string; name: string; created_at: Date; last_used_at: Date | null }>(
      'UPDATE passkeys SET name = $3 WHERE id = $2 AND user_id = $1 RETURNING id, name, created_at, last_used_at',
      [callerId, passkeyId, name],
    );
    if (!rows[0]) throw notFound(PASSKEY_NOT_FOUND);
    return view(rows[0]);
  }

  /** Removes one of the caller's passkeys; another user's or an unknown one is 404. */
  async remove(caller: PublicUser, passkeyId: string, ctx: AuditContext): Promise<void> {
    await withTransaction(this.deps.pool, async (db) => {
      const { rows } = await db.query<{ name: string }>('DELETE FROM passkeys WHERE id = $2 AND user_id = $1 RETURNING name', [
        caller.id,
        passkeyId,
      ]);
      if (!rows[0]) throw notFound(PASSKEY_NOT_FOUND);
      await this.deps.audit.record(
        {
          event: 'passkey_removed',
          actorId: caller.id,
          targetId: caller.id,
          origin: ctx,
          details: { passkey_id: passkeyId, name: rows[0].name },
        },
        db,
      );
      await notifyUser(this.deps.mail, db, caller, {
        subject: 'A passkey was removed',
        text: `The passkey named "${rows[0].name}" was removed from your account: it no longer signs you in. If this was not you, change your password at once.`,
      });
    });
    this.deps.mail?.wake();
  }

  /**
   * The options of a sign-in with a passkey alone: no credentials listed (the authenticator
   * offers the discoverable ones it holds for this site), user verification required. Counted
   * per client address, since each stores a challenge.
   */
  async signInOptions(ctx: AuditContext): Promise<PublicKeyCredentialRequestOptionsJSON> {
    const limit = await this.deps.signInOptions.consumeAddress('ip:', ctx.ip, this.deps.ipv6);
    if (limit.limited) throw tooManyPasskeySignIns(Math.max(1, limit.retryAfterSeconds));
    const options = await generateAuthenticationOptions({
      rpID: this.deps.rpId,
      allowCredentials: [],
      userVerification: 'required',
      timeout: PASSKEY_CHALLENGE_TTL_MS,
    });
    const now = this.deps.clock();
    await this.deps.pool.query(
      `INSERT INTO passkey_challenges (challenge_hash, purpose, created_at, expires_at) VALUES ($1, 'sign_in', $2, $3)`,
      [secretDigest(options.challenge), new Date(now), new Date(now + PASSKEY_CHALLENGE_TTL_MS)],
    );
    return options;
  }

  /**
   * A sign-in with a passkey alone: the challenge is spent, the credential found by its id (its
   * user handle must name the same account), the failure budget of the account counted, then
   * the assertion verified with user verification required. Answers what a full sign-in does.
   */
  async signIn(response: AuthenticationResponseJSON, ctx: AuditContext): Promise<TokenPair> {
    const challenge = signedChallenge(response.response.clientDataJSON);
    if (!challenge) throw unauthorized(INVALID_PASSKEY_SIGN_IN);
    const now = this.deps.clock();
    const spent = await this.deps.pool.query(
      `UPDATE passkey_challenges SET used_at = $2
       WHERE challenge_hash = $1 AND purpose = 'sign_in' AND used_at IS NULL AND expires_at > $2`,
      [secretDigest(challenge), new Date(now)],
    );
    if (spent.rowCount !== 1) throw unauthorized(INVALID_PASSKEY_SIGN_IN);
    const stored = await this.find(this.deps.pool, response.id);
    if (!stored || (response.response.userHandle !== undefined && !handleNames(response.response.userHandle, stored.user_id))) {
      ctx.log.warn({ event: 'login_failed', ip: ctx.ip, reason: 'unknown_passkey' }, 'passkey sign-in failed');
      await this.deps.audit.record({
        event: 'login_failed',
        targetId: stored?.user_id,
        origin: ctx,
        details: { reason: 'unknown_passkey' },
      });
      throw unauthorized(INVALID_PASSKEY_SIGN_IN);
    }
    const userId = stored.user_id;
    await this.deps.budget.countAhead(userId, ctx, 'passkey_sign_in');
    const failure = await this.verifyAssertion(response, stored, challenge, true);
    if (failure) {
      ctx.log.warn({ event: 'login_failed', userId, ip: ctx.ip, reason: failure }, 'passkey sign-in failed');
      await this.deps.audit.record({ event: 'login_failed', actorId: userId, targetId: userId, origin: ctx, details: { reason: failure } });
      throw unauthorized(INVALID_PASSKEY_SIGN_IN);
    }
    const outcome = await withTransaction(this.deps.pool, async (db): Promise<TokenPair | HttpError> => {
      const account = await this.deps.users.lockAccount(db, userId, 'share');
      if (!account) return unauthorized(INVALID_PASSKEY_SIGN_IN);
      if (account.banned) {
        await this.deps.audit.record({ event: 'login_refused_banned', actorId: userId, targetId: userId, origin: ctx }, db);
        return forbidden(ACCOUNT_BANNED);
      }
      await this.deps.audit.record(
        { event: 'login_succeeded', actorId: userId, targetId: userId, origin: ctx, details: { method: 'passkey', passkey_id: stored.id } },
        db,
      );
      return this.deps.sessions.start(db, account, ctx, PASSKEY_SIGN_IN_AMR);
    });
    if (outcome instanceof HttpError) throw outcome;
    await this.deps.budget.reset(userId);
    ctx.log.info({ event: 'login_succeeded', userId, ip: ctx.ip, method: 'passkey' }, 'login succeeded');
    return outcome;
  }

  /**
   * The options of a second step answered with a passkey: the user's credentials only, no
   * user verification asked (the password was the first factor). Undefined without passkeys.
   */
  async secondFactorOptions(db: PoolClient, userId: string): Promise<PublicKeyCredentialRequestOptionsJSON | undefined> {
    const { rows } = await db.query<{ credential_id: string; transports: string[] }>(
      'SELECT credential_id, transports FROM passkeys WHERE user_id = $1 ORDER BY created_at',
      [userId],
    );
    if (rows.length === 0) return undefined;
    return generateAuthenticationOptions({
      rpID: this.deps.rpId,
      allowCredentials: rows.map((row) => ({ id: row.credential_id, transports: row.transports })),
      userVerification: 'discouraged',
      timeout: PASSKEY_CHALLENGE_TTL_MS,
    });
  }

  /**
   * In the second step's transaction: whether the assertion is of one of this user's passkeys
   * and signs the challenge handed out with the login challenge (its hash `expectedHash`).
   * The passkey's counter and last use are recorded.
   */
  async checkSecondFactor(
    db: PoolClient,
    userId: string,
    response: AuthenticationResponseJSON,
    expectedHash: Buffer | null,
  ): Promise<boolean> {
    const challenge = signedChallenge(response.response.clientDataJSON);
    if (!challenge || !expectedHash || !secretDigest(challenge).equals(expectedHash)) return false;
    const stored = await this.find(db, response.id);
    if (!stored || stored.user_id !== userId) return false;
    return (await this.verifyAssertion(response, stored, challenge, false, db)) === undefined;
  }

  private async find(db: Pool | PoolClient, credentialId: string): Promise<StoredPasskey | undefined> {
    const { rows } = await db.query<StoredPasskey>(
      'SELECT id, user_id, credential_id, public_key, counter, transports FROM passkeys WHERE credential_id = $1',
      [credentialId],
    );
    return rows[0];
  }

  /**
   * Verifies the assertion against the stored key and counter; on success records the new
   * counter and the time of use (through `db` when given). The reason of a failure, else undefined.
   * A signature count not above the stored one (a cloned authenticator, or a replay) is a
   * failure, as the library reports it.
   */
  private async verifyAssertion(
    response: AuthenticationResponseJSON,
    stored: StoredPasskey,
    challenge: string,
    requireUserVerification: boolean,
    db: Pool | PoolClient = this.deps.pool,
  ): Promise<string | undefined> {
    let newCounter: number;
    try {
      const verified = await verifyAuthenticationResponse({
        response,
        expectedChallenge: challenge,
        expectedOrigin: this.deps.origin,
        expectedRPID: this.deps.rpId,
        credential: {
          id: stored.credential_id,
          publicKey: new Uint8Array(stored.public_key),
          counter: Number(stored.counter),
          transports: stored.transports,
        },
        requireUserVerification,
      });
      if (!verified.verified) return 'passkey_not_verified';
      newCounter = verified.authenticationInfo.newCounter;
    } catch (err) {
      return /counter/i.test((err as Error).message) ? 'passkey_counter_not_increased' : 'passkey_not_verified';
    }
    // Conditional, so of two answers verified at once against the same stored count (a clone used
    // in parallel), only one moves it; an authenticator without a counter (0) stays at 0.
    const moved = await db.query(
      'UPDATE passkeys SET counter = $2, last_used_at = $3 WHERE id = $1 AND (counter < $2 OR (counter = 0 AND $2 = 0))',
      [stored.id, newCounter, new Date(this.deps.clock())],
    );
    return moved.rowCount === 1 ? undefined : 'passkey_counter_not_increased';
  }
}

/** Whether a user handle (base64url) is the one registration gave this account. */
function handleNames(userHandle: string, userId: string): boolean {
  return Buffer.from(userHandle, 'base64url').toString('utf8') === userId;
}

function view(row: { id: string; name: string; created_at: Date; last_used_at: Date | null }): PasskeyView {
  return {
    id: row.id,
    name: row.name,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
  };
}
