import type { FastifyBaseLogger } from 'fastify';
import { rateLimitKey } from '../kit/client-ip.js';
import { HttpError, badRequest, notFound, unauthorized } from '../kit/errors.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import type { FixedWindowLimiter } from '../kit/rate-limit.js';
import { LoginAttempt, type LoginThrottle, emailDigest, tooManyFailures } from './login-throttle.js';
import { dummyPasswordHash } from './passwords.js';
import { EmailTakenError, type PublicUser, type UsersRepository } from './repository.js';
import type { AccessTokens } from './tokens.js';
import { type Credentials, type Registration, checkCredentials, checkRegistration } from './validation.js';

export const DUPLICATE_EMAIL = 'An account with this email already exists';
export const INVALID_CREDENTIALS = 'Invalid email or password';
export const USER_NOT_FOUND = 'User not found';

/** Who is asking, for the audit log lines. */
export interface RequestContext {
  ip: string;
  log: FastifyBaseLogger;
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
    private readonly users: UsersRepository,
    private readonly tokens: AccessTokens,
    private readonly throttle: LoginThrottle,
    private readonly passwords: PasswordHasher,
    /** Registrations per client IP: each costs a bcrypt hash, so a flood is refused before any hashing. */
    private readonly registrations: FixedWindowLimiter,
    /** IPv6 clients are counted per network of this many leading bits (RATE_LIMIT_IPV6_PREFIX). */
    private readonly ipv6Prefix: number,
  ) {}

  /** Rule 2: validate, reject a duplicate, hash, store. */
  async register(input: Registration, ctx: RequestContext): Promise<PublicUser> {
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
      // Rule 1: the role is never taken from the request.
      const user = await this.users.insertUser({ name, email, passwordHash, role: 'user' });
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
  async login(input: Credentials, ctx: RequestContext): Promise<{ token: string; user: PublicUser }> {
    const { email, password } = checkCredentials(input);
    const emailHash = emailDigest(email);
    const attempt = await this.throttle.reserve(email, rateLimitKey(ctx.ip, this.ipv6Prefix));
    if (!(attempt instanceof LoginAttempt)) {
      ctx.log.warn({ event: 'login_throttled', emailHash, ip: ctx.ip }, 'login refused: too many failures');
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
      ctx.log.warn(
        { event: 'login_failed', userId: account?.user.id, emailHash, ip: ctx.ip, reason: account ? 'wrong_password' : 'unknown_email' },
        'login failed',
      );
      throw unauthorized(INVALID_CREDENTIALS);
    }
    await attempt.succeeded();
    const token = await this.tokens.issueAccessToken({ id: account.user.id, role: account.user.role });
    ctx.log.info({ event: 'login_succeeded', userId: account.user.id, ip: ctx.ip }, 'login succeeded');
    return { token, user: account.user };
  }

  /** Rule 5: the account behind the token, which may have been deleted since. */
  async profile(userId: string): Promise<PublicUser> {
    const user = await this.users.findUserById(userId);
    if (!user) throw notFound(USER_NOT_FOUND);
    return user;
  }

  async listUsers(page: number, perPage: number): Promise<UserPage> {
    const { users, total } = await this.users.listUsers({ limit: perPage, offset: (page - 1) * perPage });
    return { users, total, page, perPage, lastPage: Math.max(1, Math.ceil(total / perPage)) };
  }
}
