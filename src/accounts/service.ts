import type { FastifyBaseLogger } from 'fastify';
import { rateLimitKey } from '../kit/client-ip.js';
import type { Clock } from '../kit/clock.js';
import { type Pool, withTransaction } from '../kit/db.js';
import { HttpError, badRequest, forbidden, notFound, unauthorized } from '../kit/errors.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import type { FixedWindowLimiter } from '../kit/rate-limit.js';
import type { AuditLog, Origin } from './audit.js';
import { LoginAttempt, type LoginThrottle, emailDigest, tooManyFailures } from './login-throttle.js';
import type { EmailFlows } from './email-flows.js';
import { dummyPasswordHash } from './passwords.js';
import { EmailTakenError, type PublicUser, type UsersRepository } from './repository.js';
import { ACCOUNT_BANNED, type Sessions, type TokenPair } from './sessions.js';
import { type Credentials, type Registration, checkCredentials, checkRegistration, invalidField, passwordProblem } from './validation.js';

export const DUPLICATE_EMAIL = 'An account with this email already exists';
export const INVALID_CREDENTIALS = 'Invalid email or password';
export const USER_NOT_FOUND = 'User not found';
export const WRONG_CURRENT_PASSWORD = 'Current password is incorrect';
export const EMAIL_NOT_VERIFIED =
  'Please verify your email address first: follow the link in the verification mail, or ask for a new one (POST /auth/verify-email/resend)';

/** Who is asking, for the log lines and the audit log. */
export interface AuditContext extends Origin {
  log: FastifyBaseLogger;
}

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

export class AccountsService {
  constructor(
    private readonly pool: Pool,
    private readonly users: UsersRepository,
    private readonly sessions: Sessions,
    private readonly audit: AuditLog,
    private readonly throttle: LoginThrottle,
    private readonly passwords: PasswordHasher,
    /** Registrations per client IP: each costs a bcrypt hash, so a flood is refused before any hashing. */
    private readonly registrations: FixedWindowLimiter,
    /** IPv6 clients are counted per network of this many leading bits (RATE_LIMIT_IPV6_PREFIX). */
    private readonly ipv6Prefix: number,
    private readonly clock: Clock,
    private readonly emails: EmailFlows,
    /** REQUIRE_EMAIL_VERIFICATION: registration mails a verification link, and login waits for it. */
    private readonly requireVerifiedEmail: boolean,
  ) {}

  /** Rule 2: validate, reject a duplicate, hash, store. */
  async register(input: Registration, ctx: AuditContext): Promise<PublicUser> {
    const { name, email, password } = checkRegistration(input);
    const limit = await this.registrations.consume(`ip:${rateLimitKey(ctx.ip, this.ipv6Prefix)}`);
    if (limit.limited) {
      ctx.log.warn({ event: 'registration_throttled', ip: ctx.ip }, 'registration refused: too many from this address');
      throw tooManyRegistrations(Math.max(1, limit.retryAfterSeconds));
    }
    // The cheap check spares a bcrypt hash for the common duplicate; the unique
    // index is what actually decides when two registrations race.
    if (await this.users.emailExists(email)) throw badRequest(DUPLICATE_EMAIL);
    const passwordHash = await this.passwords.hash(password);
    try {
      const user = await withTransaction(this.pool, async (db) => {
        // Rule 1: the role is never taken from the request.
        const created = await this.users.insertUser({ name, email, passwordHash, role: 'user' }, db);
        await this.audit.record({ event: 'user_registered', actorId: created.id, targetId: created.id, origin: ctx }, db);
        if (this.requireVerifiedEmail) await this.emails.sendVerification(db, created, ctx);
        return created;
      });
      if (this.requireVerifiedEmail) this.emails.mailQueued();
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
  async login(input: Credentials, ctx: AuditContext): Promise<TokenPair> {
    const { email, password } = checkCredentials(input);
    const emailHash = emailDigest(email);
    const attempt = await this.throttle.reserve(email, rateLimitKey(ctx.ip, this.ipv6Prefix));
    if (!(attempt instanceof LoginAttempt)) {
      ctx.log.warn({ event: 'login_throttled', emailHash, ip: ctx.ip }, 'login refused: too many failures');
      await this.audit.record({ event: 'login_throttled', origin: ctx, details: { email_sha256: emailHash } });
      throw tooManyFailures(attempt.retryAfterSeconds);
    }
    let account: Awaited<ReturnType<UsersRepository['findCredentialsByEmail']>>;
    let matches: boolean;
    try {
      account = await this.users.findCredentialsByEmail(email);
      matches = await this.passwords.verify(password, account?.passwordHash ?? (await dummyPasswordHash(this.passwords)));
    } catch (err) {
      await attempt.abandoned();
      throw err;
    }
    if (!account || !matches) {
      const reason = account ? 'wrong_password' : 'unknown_email';
      ctx.log.warn({ event: 'login_failed', userId: account?.user.id, emailHash, ip: ctx.ip, reason }, 'login failed');
      await this.audit.record({ event: 'login_failed', targetId: account?.user.id, origin: ctx, details: { reason, email_sha256: emailHash } });
      throw unauthorized(INVALID_CREDENTIALS);
    }
    await attempt.succeeded();
    const userId = account.user.id;
    const outcome = await withTransaction(this.pool, async (db): Promise<TokenPair | HttpError> => {
      // Locked FOR SHARE: a cut-off (global logout, ban) running now waits for this
      // session to exist, and then ends it.
      const current = await this.users.lockAccount(db, userId, 'share');
      if (!current) return unauthorized(INVALID_CREDENTIALS);
      if (current.banned) {
        await this.audit.record({ event: 'login_refused_banned', actorId: userId, targetId: userId, origin: ctx }, db);
        return forbidden(ACCOUNT_BANNED);
      }
      // After the password check: only someone who knows the password learns that the address is unverified.
      if (this.requireVerifiedEmail && !current.user.emailVerified) {
        await this.audit.record({ event: 'login_refused_unverified', actorId: userId, targetId: userId, origin: ctx }, db);
        return forbidden(EMAIL_NOT_VERIFIED);
      }
      await this.audit.record({ event: 'login_succeeded', actorId: userId, targetId: userId, origin: ctx }, db);
      return this.sessions.start(db, current, ctx);
    });
    if (outcome instanceof HttpError) throw outcome;
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
    const newProblem = passwordProblem(input.new_password);
    if (newProblem) throw invalidField('new_password', newProblem);
    const attempt = await this.throttle.reserve(caller.email, rateLimitKey(ctx.ip, this.ipv6Prefix));
    if (!(attempt instanceof LoginAttempt)) {
      ctx.log.warn({ event: 'password_change_throttled', userId, ip: ctx.ip }, 'password change refused: too many failures');
      await this.audit.record({ event: 'login_throttled', actorId: userId, targetId: userId, origin: ctx, details: { during: 'password_change' } });
      throw tooManyFailures(attempt.retryAfterSeconds);
    }
    let matches: boolean;
    try {
      const currentHash = await this.users.findPasswordHashById(userId);
      // A current password no account could have (too long) is simply wrong; it still costs one comparison.
      matches =
        (await this.passwords.verify(input.current_password, currentHash ?? (await dummyPasswordHash(this.passwords)))) &&
        currentHash !== undefined &&
        passwordProblem(input.current_password) === undefined;
    } catch (err) {
      await attempt.abandoned();
      throw err;
    }
    if (!matches) {
      ctx.log.warn({ event: 'password_change_failed', userId, ip: ctx.ip }, 'password change failed: wrong current password');
      await this.audit.record({ event: 'password_change_failed', actorId: userId, targetId: userId, origin: ctx });
      throw badRequest(WRONG_CURRENT_PASSWORD);
    }
    await attempt.succeeded();
    const newHash = await this.passwords.hash(input.new_password);
    const pair = await withTransaction(this.pool, async (db) => {
      const current = await this.users.lockAccount(db, userId, 'update');
      if (!current) throw notFound(USER_NOT_FOUND);
      await this.users.setPasswordHash(db, userId, newHash, this.clock());
      const cutOff = await this.sessions.revokeEverything(db, userId, 'password_changed');
      await this.audit.record({ event: 'password_changed', actorId: userId, targetId: userId, origin: ctx }, db);
      return this.sessions.start(db, { ...current, accessTokensFrom: cutOff }, ctx);
    });
    ctx.log.info({ event: 'password_changed', userId, ip: ctx.ip }, 'password changed');
    return pair;
  }

  /** One page of the accounts, or of those whose email or name holds `search` (any case). */
  async listUsers(page: number, perPage: number, search?: string): Promise<UserPage> {
    const { users, total } = await this.users.listUsers({ limit: perPage, offset: (page - 1) * perPage, search });
    return { users, total, page, perPage, lastPage: Math.max(1, Math.ceil(total / perPage)) };
  }
}
