import { createHash } from 'node:crypto';
import { rateLimitKey } from '../../kit/client-ip.js';
import type { Clock } from '../../kit/clock.js';
import { type CounterStore, FixedWindowLimiter } from '../../kit/rate-limit.js';
import { authErrors } from './errors.js';

// Supabase Auth's per-address limits on its auth endpoints, its limits on emails (per hour for the
// service, and per recipient as SMTP_MAX_FREQUENCY), and
// a per-account limit on failed password sign-ins that GoTrue does not have. Every request is
// counted before any work is done for it, so concurrent requests cannot slip past a limit.

export interface AuthRateLimitSettings {
  /** POST /token (password and refresh_token grants) per address per 5 minutes. */
  tokenRequests: number;
  /** POST /signup per address per 5 minutes. */
  signups: number;
  /** Emails per hour, all addresses together. */
  emailsSent: number;
  /** Failed password sign-ins per account per 15 minutes. */
  loginFailures: number;
  /** POST/GET /verify per address per 5 minutes. */
  verifications: number;
  /** Seconds between two mails to one address (GoTrue's SMTP_MAX_FREQUENCY). */
  emailFrequencySeconds: number;
  /** IPv6 clients are counted per network of this many leading bits. */
  ipv6Prefix: number;
}

const FIVE_MINUTES = 5 * 60_000;
const HOUR = 60 * 60_000;
const FIFTEEN_MINUTES = 15 * 60_000;

/** A counter key for an email address that never holds it in clear (keys land in Redis). */
const accountKey = (email: string) => createHash('sha256').update(email).digest('hex');

/** A reserved sign-in attempt: counted as a failure unless released by a success. */
export interface SignInAttempt {
  succeeded(): Promise<void>;
}

const NOTHING_RESERVED: SignInAttempt = { succeeded: async () => {} };

export class AuthRateLimits {
  private readonly tokenRequests: FixedWindowLimiter;
  private readonly signups: FixedWindowLimiter;
  private readonly emailsSent: FixedWindowLimiter;
  private readonly loginFailures: FixedWindowLimiter;
  private readonly verifications: FixedWindowLimiter;
  private readonly emailFrequency: FixedWindowLimiter;
  private readonly ipv6Prefix: number;

  /**
   * `storeFor` gives each limit its own counter store: the in-process store sweeps expired windows
   * assuming they all have one length.
   */
  constructor(storeFor: (limit: string) => CounterStore, clock: Clock, settings: AuthRateLimitSettings) {
    this.tokenRequests = new FixedWindowLimiter(settings.tokenRequests, FIVE_MINUTES, storeFor('token'), clock);
    this.signups = new FixedWindowLimiter(settings.signups, FIVE_MINUTES, storeFor('signup'), clock);
    this.emailsSent = new FixedWindowLimiter(settings.emailsSent, HOUR, storeFor('email-sent'), clock);
    this.loginFailures = new FixedWindowLimiter(settings.loginFailures, FIFTEEN_MINUTES, storeFor('login-failures'), clock);
    this.verifications = new FixedWindowLimiter(settings.verifications, FIVE_MINUTES, storeFor('verify'), clock);
    this.emailFrequency = new FixedWindowLimiter(1, settings.emailFrequencySeconds * 1000, storeFor('email-frequency'), clock);
    this.ipv6Prefix = settings.ipv6Prefix;
  }

  /** One request to POST /token from `ip`; throws 429 over_request_rate_limit past the limit. */
  async tokenRequest(ip: string): Promise<void> {
    const decision = await this.tokenRequests.consume(rateLimitKey(ip, this.ipv6Prefix));
    if (decision.limited) throw authErrors.overRequestRateLimit(Math.max(decision.retryAfterSeconds, 1));
  }

  /** One request to POST /signup from `ip`. */
  async signup(ip: string): Promise<void> {
    const decision = await this.signups.consume(rateLimitKey(ip, this.ipv6Prefix));
    if (decision.limited) throw authErrors.overRequestRateLimit(Math.max(decision.retryAfterSeconds, 1));
  }

  /** One request to /verify from `ip` (GoTrue's RATE_LIMIT_VERIFY): bounds guessing of emailed codes. */
  async verify(ip: string): Promise<void> {
    const decision = await this.verifications.consume(rateLimitKey(ip, this.ipv6Prefix));
    if (decision.limited) throw authErrors.overRequestRateLimit(Math.max(decision.retryAfterSeconds, 1));
  }

  /**
   * One mail to `email` about to be sent: at most one per address per SMTP max frequency, as
   * GoTrue. Counted by address whether or not it is registered, so a 429 tells nothing about who is.
   */
  async emailToAddress(email: string): Promise<void> {
    const decision = await this.emailFrequency.consume(accountKey(email.toLowerCase()));
    if (decision.limited) throw authErrors.overEmailSendFrequency(Math.max(decision.retryAfterSeconds, 1));
  }

  /** One confirmation email about to be sent; throws 429 over_email_send_rate_limit when the hour's are spent. */
  async emailSent(): Promise<void> {
    const decision = await this.emailsSent.consume('email-sent');
    if (decision.limited) throw authErrors.overEmailSendRateLimit(Math.max(decision.retryAfterSeconds, 1));
  }

  /**
   * Reserves a password sign-in for the account before the password is checked: the reservation
   * is one atomic increment, so N concurrent guesses take N places and only `loginFailures` of
   * them reach the password check. A success clears the account's count (as the accounts service
   * does); anything else stays counted. Keyed by the address as the sign-in looks it up, whether
   * or not such an account exists, so a 429 says nothing about which addresses are registered.
   */
  async reserveSignIn(rawEmail: string | undefined): Promise<SignInAttempt> {
    // Without an email the sign-in is refused before any password is checked.
    if (!rawEmail) return NOTHING_RESERVED;
    const key = accountKey(rawEmail.trim().toLowerCase());
    const decision = await this.loginFailures.consume(key);
    if (decision.limited) throw authErrors.tooManyFailedSignIns(Math.max(decision.retryAfterSeconds, 1));
    return { succeeded: () => this.loginFailures.reset(key) };
  }
}
