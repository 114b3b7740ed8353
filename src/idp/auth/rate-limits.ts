import { createHash } from 'node:crypto';
import type { Ipv6Prefixes } from '../../kit/http/client-ip.js';
import type { Clock } from '../../kit/clock.js';
import { LoginAttempt, LoginThrottle } from '../../kit/login-throttle.js';
import { type CounterStore, FixedWindowLimiter, type RateLimitDecision } from '../../kit/rate-limit.js';
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
  /** Anonymous sign-ins (POST /signup without email) per address per hour. */
  anonymousSignIns: number;
  /** Emails per hour, all addresses together. */
  emailsSent: number;
  /** Failed password sign-ins per (account, address) per 15 minutes. */
  loginFailures: number;
  /** Failed password sign-ins per account from every address together per 15 minutes. */
  loginFailuresPerAccount: number;
  /** Distinct accounts that may fail sign-ins from one address per 15 minutes. */
  loginAccountsPerAddress: number;
  /** POST/GET /verify per address per 5 minutes. */
  verifications: number;
  /** Seconds between two mails to one address (GoTrue's SMTP_MAX_FREQUENCY). */
  emailFrequencySeconds: number;
  /** IPv6 clients are counted per network of this many leading bits... */
  ipv6Prefix: number;
  /** ...and per wider network too (a site's /48), allowed 16 times the limit. */
  ipv6WidePrefix: number;
}

const FIVE_MINUTES = 5 * 60_000;
const HOUR = 60 * 60_000;
const FIFTEEN_MINUTES = 15 * 60_000;

/** A counter key for an email address that never holds it in clear (keys land in Redis). */
export const accountKey = (email: string) => createHash('sha256').update(email).digest('hex');

/** GoTrue's 429 over_request_rate_limit when a count is past its limit (Retry-After at least a second). */
export function refuseOverRequestRate(decision: RateLimitDecision): void {
  if (decision.limited) throw authErrors.overRequestRateLimit(Math.max(decision.retryAfterSeconds, 1));
}

/** One request from `ip` counted by a per-address limiter (IPv6 per network); 429 over_request_rate_limit past it. */
export async function countRequestFrom(limiter: FixedWindowLimiter, ip: string, ipv6: Ipv6Prefixes): Promise<void> {
  refuseOverRequestRate(await limiter.consumeAddress('', ip, ipv6));
}

/** A reserved sign-in attempt: counted as a failure unless released by a success. */
export interface SignInAttempt {
  succeeded(): Promise<void>;
}

const NOTHING_RESERVED: SignInAttempt = { succeeded: async () => {} };

export class AuthRateLimits {
  private readonly tokenRequests: FixedWindowLimiter;
  private readonly signups: FixedWindowLimiter;
  private readonly anonymousSignIns: FixedWindowLimiter;
  private readonly emailsSent: FixedWindowLimiter;
  private readonly signIns: LoginThrottle;
  private readonly verifications: FixedWindowLimiter;
  private readonly emailFrequency: FixedWindowLimiter;
  private readonly ipv6: Ipv6Prefixes;

  /**
   * `storeFor` gives each limit its own counter store: the in-process store sweeps expired windows
   * assuming they all have one length.
   */
  constructor(storeFor: (limit: string) => CounterStore, clock: Clock, settings: AuthRateLimitSettings) {
    this.tokenRequests = new FixedWindowLimiter(settings.tokenRequests, FIVE_MINUTES, storeFor('token'), clock);
    this.signups = new FixedWindowLimiter(settings.signups, FIVE_MINUTES, storeFor('signup'), clock);
    this.anonymousSignIns = new FixedWindowLimiter(settings.anonymousSignIns, HOUR, storeFor('anonymous-sign-in'), clock);
    this.emailsSent = new FixedWindowLimiter(settings.emailsSent, HOUR, storeFor('email-sent'), clock);
    this.signIns = new LoginThrottle(
      storeFor('login-failures'),
      clock,
      {
        perAccountAndAddress: settings.loginFailures,
        perAccount: settings.loginFailuresPerAccount,
        accountsPerAddress: settings.loginAccountsPerAddress,
        windowMs: FIFTEEN_MINUTES,
      },
      { prefix: settings.ipv6Prefix, widePrefix: settings.ipv6WidePrefix },
      storeFor('login-known-addresses'),
    );
    this.verifications = new FixedWindowLimiter(settings.verifications, FIVE_MINUTES, storeFor('verify'), clock);
    this.emailFrequency = new FixedWindowLimiter(1, settings.emailFrequencySeconds * 1000, storeFor('email-frequency'), clock);
    this.ipv6 = { prefix: settings.ipv6Prefix, widePrefix: settings.ipv6WidePrefix };
  }

  /** One request to POST /token from `ip`; throws 429 over_request_rate_limit past the limit. */
  async tokenRequest(ip: string): Promise<void> {
    await countRequestFrom(this.tokenRequests, ip, this.ipv6);
  }

  /** One request to POST /signup from `ip`. */
  async signup(ip: string): Promise<void> {
    await countRequestFrom(this.signups, ip, this.ipv6);
  }

  /**
   * One anonymous sign-in from `ip` (GoTrue's RATE_LIMIT_ANONYMOUS_USERS): each makes a user row,
   * so it has its own hourly limit, far below the sign-up one.
   */
  async anonymousSignIn(ip: string): Promise<void> {
    await countRequestFrom(this.anonymousSignIns, ip, this.ipv6);
  }

  /** One request to /verify from `ip` (GoTrue's RATE_LIMIT_VERIFY): bounds guessing of emailed codes. */
  async verify(ip: string): Promise<void> {
    await countRequestFrom(this.verifications, ip, this.ipv6);
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
   * One mail about to be sent where the request's answer must not tell whether it is (recovery,
   * resend): takes from the hour's mails and says whether it may go, never throws.
   */
  async emailQuotaTaken(): Promise<boolean> {
    return !(await this.emailsSent.consume('email-sent')).limited;
  }

  /**
   * Reserves a password sign-in before the password is checked (docs/idp.md, failed sign-ins):
   * counted per (account, address), per account with a far higher ceiling, and per address as
   * distinct failing accounts, all in one atomic step, so N concurrent guesses from one address
   * take N places and only `loginFailures` of them reach the password check, while the owner
   * signing in from another address is not locked out. A success clears the pair's count;
   * anything else stays counted. Keyed by the address as the sign-in looks it up, whether or not
   * such an account exists, so a 429 says nothing about which addresses are registered.
   */
  async reserveSignIn(rawEmail: string | undefined, ip: string): Promise<SignInAttempt> {
    // Without an email the sign-in is refused before any password is checked.
    if (!rawEmail) return NOTHING_RESERVED;
    const attempt = await this.signIns.reserve(accountKey(rawEmail.trim().toLowerCase()), ip);
    if (!(attempt instanceof LoginAttempt)) throw authErrors.tooManyFailedSignIns(attempt.retryAfterSeconds);
    return attempt;
  }
}
