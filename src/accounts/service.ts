import type { Ipv6Prefixes } from '../kit/http/client-ip.js';
import type { Clock } from '../kit/clock.js';
import { type Pool, withTransaction } from '../kit/db.js';
import { HttpError, badRequest, forbidden, notFound, unauthorized } from '../kit/http/errors.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import type { FixedWindowLimiter } from '../kit/rate-limit.js';
import type { AuditContext, AuditLog } from './audit.js';
import { LoginAttempt, type LoginRefusal, type LoginThrottle } from '../kit/login-throttle.js';
import { type RefusalRecorder, tooManyFailures } from './login-throttle.js';
import type { EmailFlows } from './email-flows.js';
import type { FactorChallenge, Factors } from './factors.js';
import { dummyPasswordHash } from './passwords.js';
import { EmailTakenError, type PublicUser, type UsersRepository } from './repository.js';
import { ACCOUNT_BANNED, type Sessions, type TokenPair } from './sessions.js';
import {
  type Credentials,
  type Registration,
  checkCredentials,
  checkRegistration,
  invalidField,
  newPasswordProblem,
  passwordProblem,
} from './validation.js';

export const DUPLICATE_EMAIL = 'An account with this email already exists';
export const INVALID_CREDENTIALS = 'Invalid email or password';
export const USER_NOT_FOUND = 'User not found';
export const WRONG_CURRENT_PASSWORD = 'Current password is incorrect';
export const EMAIL_NOT_VERIFIED =
  'Please verify your email address first: follow the link in the verification mail, or ask for a new one (POST /auth/verify-email/resend)';

export interface PasswordChange {
  current_password: string;
  new_password: string;
}

export function tooManyRegistrations(seconds: number): HttpError {
  return new HttpError(429, `Too many registrations from this address, try again in ${seconds} seconds.`, {
    'retry-after': String(seconds),
  });
}

export interface UserPage {
  users: PublicUser[];
  total: number;
  page: number;
  perPage: number;
  lastPage: number;
}

export interface AccountsServiceOptions {
  pool: Pool;
  users: UsersRepository;
  sessions: Sessions;
  audit: AuditLog;
  throttle: LoginThrottle;
  /** Which refusals of the throttle are recorded (the first of each window). */
  refusals: RefusalRecorder;
  /** The email as the audit log, the logs and the counters name it (an HMAC). */
  emailDigest: (email: string) => string;
  passwords: PasswordHasher;
  /** Registrations per client IP: each costs a bcrypt hash, so a flood is refused before any hashing. */
  registrations: FixedWindowLimiter;
  /** How IPv6 clients are grouped (RATE_LIMIT_IPV6_PREFIX and RATE_LIMIT_IPV6_WIDE_PREFIX). */
  ipv6: Ipv6Prefixes;
  clock: Clock;
  emails: EmailFlows;
  /** REQUIRE_EMAIL_VERIFICATION: registration mails a verification link, and login waits for it. */
  requireVerifiedEmail: boolean;
  /** Second factors: a login of a user with one answers a challenge instead of tokens. */
  factors: Factors;
}

export class AccountsService {
  constructor(private readonly deps: AccountsServiceOptions) {}

  /** Rule 2: validate, reject a duplicate, hash, store. */
  async register(input: Registration, ctx: AuditContext): Promise<PublicUser> {
    const { name, email, password } = checkRegistration(input);
    const limit = await this.deps.registrations.consumeAddress('ip:', ctx.ip, this.deps.ipv6);
    if (limit.limited) {
      ctx.log.warn({ event: 'registration_throttled', ip: ctx.ip }, 'registration refused: too many from this address');
      throw tooManyRegistrations(Math.max(1, limit.retryAfterSeconds));
    }
    // The cheap check spares a bcrypt hash for the common duplicate; the unique
    // index is what actually decides when two registrations race.
    if (await this.deps.users.emailExists(email)) throw badRequest(DUPLICATE_EMAIL);
    const passwordHash = await this.deps.passwords.hash(password);
    try {
      const user = await withTransaction(this.deps.pool, async (db) => {
        // Rule 1: the role is never taken from the request.
        const created = await this.deps.users.insertUser({ name, email, passwordHash, role: 'user' }, db);
        await this.deps.audit.record({ event: 'user_registered', actorId: created.id, targetId: created.id, origin: ctx }, db);
        if (this.deps.requireVerifiedEmail) await this.deps.emails.sendVerification(db, created, ctx);
        return created;
      });
      if (this.deps.requireVerifiedEmail) this.deps.emails.mailQueued();
      ctx.log.info({ event: 'user_registered', userId: user.id, ip: ctx.ip }, 'user registered');
      return user;
    } catch (err) {
      if (err instanceof EmailTakenError) throw badRequest(DUPLICATE_EMAIL);
      throw err;
    }
  }

  /**
   * Rule 3: an unknown email and a wrong password give the same 401 after the
   * same work (one lookup, one cost-12 comparison). The attempt is counted
   * against the limits before that work, so parallel guesses cannot all get
   * a comparison before the first failure is recorded.
   */
  async login(input: Credentials, ctx: AuditContext): Promise<TokenPair | FactorChallenge> {
    const { email, password } = checkCredentials(input);
    const emailHash = this.deps.emailDigest(email);
    const attempt = await this.deps.throttle.reserve(emailHash, ctx.ip);
    if (!(attempt instanceof LoginAttempt)) {
      await this.recordRefusal(attempt, ctx, { emailHash, details: { email_hmac: emailHash } });
      throw tooManyFailures(attempt.retryAfterSeconds);
    }
    let account: Awaited<ReturnType<UsersRepository['findCredentialsByEmail']>>;
    let matches: boolean;
    try {
      account = await this.deps.users.findCredentialsByEmail(email);
      matches = await this.deps.passwords.verify(password, account?.passwordHash ?? (await dummyPasswordHash(this.deps.passwords)));
    } catch (err) {
      await attempt.abandoned();
      throw err;
    }
    if (!account || !matches) {
      const reason = account ? 'wrong_password' : 'unknown_email';
      ctx.log.warn({ event: 'login_failed', userId: account?.user.id, emailHash, ip: ctx.ip, reason }, 'login failed');
      await this.deps.audit.record({
        event: 'login_failed',
        targetId: account?.user.id,
        origin: ctx,
        details: { reason, email_hmac: emailHash },
      });
      throw unauthorized(INVALID_CREDENTIALS);
    }
    await attempt.succeeded();
    const userId = account.user.id;
    const outcome = await withTransaction(this.deps.pool, async (db): Promise<TokenPair | FactorChallenge | HttpError> => {
      // Locked FOR SHARE: a cut-off (global logout, ban) running now waits for this
      // session to exist, and then ends it.
      const current = await this.deps.users.lockAccount(db, userId, 'share');
      if (!current) return unauthorized(INVALID_CREDENTIALS);
      if (current.banned) {
        await this.deps.audit.record({ event: 'login_refused_banned', actorId: userId, targetId: userId, origin: ctx }, db);
        return forbidden(ACCOUNT_BANNED);
      }
      // After the password check: only someone who knows the password learns that the address is unverified.
      if (this.deps.requireVerifiedEmail && !current.user.emailVerified) {
        await this.deps.audit.record({ event: 'login_refused_unverified', actorId: userId, targetId: userId, origin: ctx }, db);
        return forbidden(EMAIL_NOT_VERIFIED);
      }
      // The password was right; a user with a second factor gets a challenge, not a session.
      if (await this.deps.factors.required(db, userId)) {
        await this.deps.audit.record({ event: 'second_factor_required', actorId: userId, targetId: userId, origin: ctx }, db);
        return this.deps.factors.challenge(db, userId);
      }
      await this.deps.audit.record({ event: 'login_succeeded', actorId: userId, targetId: userId, origin: ctx }, db);
      return this.deps.sessions.start(db, current, ctx);
    });
    if (outcome instanceof HttpError) throw outcome;
    if ('mfa_required' in outcome) {
      ctx.log.info({ event: 'second_factor_required', userId, ip: ctx.ip }, 'password accepted, second factor required');
      return outcome;
    }
    ctx.log.info({ event: 'login_succeeded', userId, ip: ctx.ip }, 'login succeeded');
    return outcome;
  }

  /**
   * The new password follows the registration rules. The current one is checked
   * like a login, against the same limits and counted before bcrypt. Success
   * ends every session, refuses every access token issued before, and starts a
   * new session for the caller.
   */
  async changePassword(caller: PublicUser, input: PasswordChange, ctx: AuditContext): Promise<TokenPair> {
    const userId = caller.id;
    const newProblem = newPasswordProblem(input.new_password);
    if (newProblem) throw invalidField('new_password', newProblem);
    const attempt = await this.deps.throttle.reserve(this.deps.emailDigest(caller.email), ctx.ip);
    if (!(attempt instanceof LoginAttempt)) {
      await this.recordRefusal(attempt, ctx, { userId, details: { during: 'password_change' } });
      throw tooManyFailures(attempt.retryAfterSeconds);
    }
    let matches: boolean;
    try {
      const currentHash = await this.deps.users.findPasswordHashById(userId);
      // A current password no account could have (too long) is simply wrong; it still costs one comparison.
      matches =
        (await this.deps.passwords.verify(input.current_password, currentHash ?? (await dummyPasswordHash(this.deps.passwords)))) &&
        currentHash !== undefined &&
        passwordProblem(input.current_password) === undefined;
    } catch (err) {
      await attempt.abandoned();
      throw err;
    }
    if (!matches) {
      ctx.log.warn({ event: 'password_change_failed', userId, ip: ctx.ip }, 'password change failed: wrong current password');
      await this.deps.audit.record({ event: 'password_change_failed', actorId: userId, targetId: userId, origin: ctx });
      throw badRequest(WRONG_CURRENT_PASSWORD);
    }
    await attempt.succeeded();
    const newHash = await this.deps.passwords.hash(input.new_password);
    const pair = await withTransaction(this.deps.pool, async (db) => {
      const current = await this.deps.users.lockAccount(db, userId, 'update');
      if (!current) throw notFound(USER_NOT_FOUND);
      await this.deps.users.setPasswordHash(db, userId, newHash, this.deps.clock());
      const cutOff = await this.deps.sessions.revokeEverything(db, userId, 'password_changed');
      await this.deps.audit.record({ event: 'password_changed', actorId: userId, targetId: userId, origin: ctx }, db);
      return this.deps.sessions.start(db, { ...current, accessTokensFrom: cutOff }, ctx);
    });
    ctx.log.info({ event: 'password_changed', userId, ip: ctx.ip }, 'password changed');
    return pair;
  }

  /**
   * A refused attempt is logged and audited once per refusing limit and window, with the limit
   * that refused it and when that window ends; the refusals after it only count in the metrics
   * (a flood of refused logins must not fill the append-only audit log).
   */
  private async recordRefusal(
    refusal: LoginRefusal,
    ctx: AuditContext,
    about: { emailHash?: string; userId?: string; details: Record<string, string> },
  ): Promise<void> {
    if (!(await this.deps.refusals.isFirstOfWindow(refusal))) return;
    const until = new Date(this.deps.clock() + refusal.retryAfterSeconds * 1000).toISOString();
    ctx.log.warn(
      { event: 'login_throttled', limit: refusal.limit, until, emailHash: about.emailHash, userId: about.userId, ip: ctx.ip },
      'logins refused until the window ends: too many failures (later refusals are only counted in the metrics)',
    );
    await this.deps.audit.record({
      event: 'login_throttled',
      actorId: about.userId,
      targetId: about.userId,
      origin: ctx,
      details: { ...about.details, limit: refusal.limit, until },
    });
  }

  /** One page of the accounts, or of those whose email or name holds `search` (any case). */
  async listUsers(page: number, perPage: number, search?: string): Promise<UserPage> {
    const { users, total } = await this.deps.users.listUsers({ limit: perPage, offset: (page - 1) * perPage, search });
    return { users, total, page, perPage, lastPage: Math.max(1, Math.ceil(total / perPage)) };
  }
}
