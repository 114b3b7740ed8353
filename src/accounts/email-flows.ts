import type { Ipv6Prefixes } from '../kit/http/client-ip.js';
import type { Clock } from '../kit/clock.js';
import { type Pool, type PoolClient, withTransaction } from '../kit/db.js';
import type { MailOutbox } from '../kit/service.js';
import { HttpError, badRequest } from '../kit/http/errors.js';
import { escapeHtml } from '../kit/text.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import type { FixedWindowLimiter } from '../kit/rate-limit.js';
import type { AuditContext, AuditEventName, AuditLog } from './audit.js';
import { type EmailTokenPurpose, type EmailTokens, newEmailToken } from './email-tokens.js';
import type { PublicUser, UsersRepository } from './repository.js';
import type { Sessions } from './sessions.js';
import { emailProblem, invalidField, newPasswordProblem, normalizeEmail } from './validation.js';

export const PASSWORD_RESET_TTL_MS = 30 * 60_000;
export const EMAIL_VERIFICATION_TTL_MS = 24 * 3600_000;

export const MAIL_NOT_CONFIGURED = 'Sending mail is not configured on this server';
export const INVALID_EMAIL_TOKEN = 'This link is invalid, already used or expired; request a new one';
export const RESET_REQUESTED = 'If an account with this email exists, a password reset link has been sent to it';
export const VERIFICATION_REQUESTED = 'If an unverified account with this email exists, a verification link has been sent to it';

export function tooManyMailRequests(seconds: number): HttpError {
  return new HttpError(429, `Too many requests from this address, try again in ${seconds} seconds.`, { 'retry-after': String(seconds) });
}

export interface EmailFlowLimits {
  /** Reset and verification requests per client IP (MAIL_REQUESTS_MAX_PER_IP per MAIL_REQUESTS_WINDOW). */
  perIp: FixedWindowLimiter;
  /** At most one mail per address per minute, whichever kind. */
  perAddress: FixedWindowLimiter;
}

interface MailText {
  subject: string;
  intro: string;
  outro: string;
}

const RESET_MAIL: MailText = {
  subject: 'Reset your password',
  intro:
    'Someone (hopefully you) asked to reset the password of the account of this address. Choose a new password here; the link works once, for 30 minutes:',
  outro: 'If you did not ask for this, ignore this mail: your password stays as it is.',
};

const VERIFICATION_MAIL: MailText = {
  subject: 'Confirm your email address',
  intro: 'Confirm that this address is yours; the link works once, for 24 hours:',
  outro: 'If you did not create an account, ignore this mail.',
};

/** The mail with its link; the token travels in the fragment, which browsers never send to a server. */
function mailWithLink(text: MailText, link: string) {
  return {
    subject: text.subject,
    text: `${text.intro}\n\n${link}\n\n${text.outro}\n`,
    html: `<p>${escapeHtml(text.intro)}</p><p><a href="${escapeHtml(link)}">${escapeHtml(link)}</a></p><p>${escapeHtml(text.outro)}</p>`,
  };
}

/**
 * Password reset and email verification: tokens sent by mail, each single-use,
 * stored hashed, written with their mail in one transaction.
 */
export interface EmailFlowsOptions {
  pool: Pool;
  users: UsersRepository;
  tokens: EmailTokens;
  sessions: Sessions;
  audit: AuditLog;
  passwords: PasswordHasher;
  limits: EmailFlowLimits;
  /** How IPv6 clients are grouped (RATE_LIMIT_IPV6_PREFIX and RATE_LIMIT_IPV6_WIDE_PREFIX). */
  ipv6: Ipv6Prefixes;
  /** The email as the audit log and the logs name it (an HMAC). */
  emailDigest: (email: string) => string;
  /** ACCOUNTS_PUBLIC_URL: where the reset and verification pages are. */
  publicUrl: string;
  /** The outbox; undefined when SMTP_URL is not set (the mail endpoints answer 503). */
  mail: MailOutbox | undefined;
  clock: Clock;
}

export class EmailFlows {
  constructor(private readonly deps: EmailFlowsOptions) {}

  /** POST /auth/password-reset: the same answer, after the same statements, whether or not the address has an account. */
  async requestPasswordReset(input: { email: string }, ctx: AuditContext): Promise<void> {
    await this.requestMail(input.email, 'password_reset', ctx);
  }

  /** POST /auth/verify-email/resend: the same answer whether the address is unknown, verified or not. */
  async resendVerification(input: { email: string }, ctx: AuditContext): Promise<void> {
    await this.requestMail(input.email, 'email_verification', ctx);
  }

  /**
   * Queues the verification mail of a just-registered user in the registration's
   * transaction; the caller wakes the worker (mailQueued) after the commit.
   */
  async sendVerification(db: PoolClient, user: PublicUser, ctx: AuditContext): Promise<void> {
    this.requireMail();
    const token = newEmailToken();
    await this.deps.tokens.issue(db, {
      email: user.email,
      purpose: 'email_verification',
      token,
      now: this.deps.clock(),
      ttlMs: EMAIL_VERIFICATION_TTL_MS,
      mail: mailWithLink(VERIFICATION_MAIL, `${this.deps.publicUrl}/verify-email#token=${token}`),
    });
    await this.deps.audit.record({ event: 'email_verification_sent', actorId: user.id, targetId: user.id, origin: ctx }, db);
  }

  /** After a commit that queued mail: send it now rather than at the worker's next poll. */
  mailQueued(): void {
    this.deps.mail?.wake();
  }

  /** Whether the mail endpoints can work; they answer 503 otherwise. */
  get mailConfigured(): boolean {
    return this.deps.mail !== undefined;
  }

  private requireMail(): void {
    if (!this.deps.mail) throw new HttpError(503, MAIL_NOT_CONFIGURED);
  }

  private async requestMail(rawEmail: string, purpose: EmailTokenPurpose, ctx: AuditContext): Promise<void> {
    this.requireMail();
    const email = normalizeEmail(rawEmail);
    const problem = emailProblem(email);
    if (problem) throw invalidField('email', problem);
    const ipLimit = await this.deps.limits.perIp.consumeAddress('ip:', ctx.ip, this.deps.ipv6);
    if (ipLimit.limited) {
      ctx.log.warn({ event: 'mail_request_throttled', ip: ctx.ip }, 'mail request refused: too many from this address');
      throw tooManyMailRequests(Math.max(1, ipLimit.retryAfterSeconds));
    }
    const emailHash = this.deps.emailDigest(email);
    // Counted for every address, known or not, so the limit itself reveals nothing;
    // over it, the request is answered as usual and nothing is sent.
    const addressLimit = await this.deps.limits.perAddress.consume(`address:${emailHash}`);
    if (addressLimit.limited) {
      ctx.log.info(
        { event: 'mail_request_skipped', purpose, emailHash },
        'mail request answered without a mail: one was sent to this address within the minute',
      );
      return;
    }
    const token = newEmailToken();
    const reset = purpose === 'password_reset';
    const event: AuditEventName = reset ? 'password_reset_requested' : 'email_verification_requested';
    const now = this.deps.clock();
    const userId = await withTransaction(this.deps.pool, async (db) => {
      const id = await this.deps.tokens.issue(db, {
        email,
        purpose,
        token,
        now,
        ttlMs: reset ? PASSWORD_RESET_TTL_MS : EMAIL_VERIFICATION_TTL_MS,
        mail: reset
          ? mailWithLink(RESET_MAIL, `${this.deps.publicUrl}/reset-password#token=${token}`)
          : mailWithLink(VERIFICATION_MAIL, `${this.deps.publicUrl}/verify-email#token=${token}`),
      });
      await this.deps.audit.record({ event, targetId: id, origin: ctx, details: { email_hmac: emailHash } }, db);
      return id;
    });
    // The route wakes the worker once the answer is sent (mailQueued in onResponse), for every
    // address alike: sending a mail beside the answer would make known addresses slower to answer.
    ctx.log.info({ event, userId, emailHash, ip: ctx.ip }, reset ? 'password reset requested' : 'email verification requested');
  }

  /**
   * POST /auth/password-reset/check: whether a reset link still works, asked by
   * the page as it opens (not after the new password is typed twice), with the
   * account's address for the person and their password manager. Nothing is
   * spent: only the confirm uses the token up.
   */
  async checkPasswordReset(input: { token: string }): Promise<{ email: string }> {
    const userId = await this.deps.tokens.peek(input.token, 'password_reset', this.deps.clock());
    const account = userId === undefined ? undefined : await this.deps.users.findAccountById(userId);
    if (!account) throw badRequest(INVALID_EMAIL_TOKEN);
    return { email: account.user.email };
  }

  /**
   * POST /auth/password-reset/confirm. The token is checked before the new password
   * is hashed (a made-up token costs no bcrypt work), and consumed in the transaction
   * that changes the password: of two confirms of one token, exactly one succeeds.
   */
  async confirmPasswordReset(input: { token: string; new_password: string }, ctx: AuditContext): Promise<void> {
    const problem = newPasswordProblem(input.new_password);
    if (problem) throw invalidField('new_password', problem);
    if (!(await this.deps.tokens.peek(input.token, 'password_reset', this.deps.clock()))) throw badRequest(INVALID_EMAIL_TOKEN);
    const newHash = await this.deps.passwords.hash(input.new_password);
    const userId = await withTransaction(this.deps.pool, async (db) => {
      const now = this.deps.clock();
      const id = await this.deps.tokens.consume(db, input.token, 'password_reset', now);
      if (!id) return undefined;
      await this.deps.users.setPasswordHash(db, id, newHash, now);
      await this.deps.tokens.retireAll(db, id, 'password_reset', now);
      // Following the link proved the address too.
      await this.deps.tokens.markEmailVerified(db, id, now);
      // Ends every session and moves the access-token cut-off, like a logout everywhere.
      await this.deps.sessions.revokeEverything(db, id, 'password_reset');
      await this.deps.audit.record({ event: 'password_reset_completed', actorId: id, targetId: id, origin: ctx }, db);
      return id;
    });
    if (!userId) throw badRequest(INVALID_EMAIL_TOKEN);
    ctx.log.info({ event: 'password_reset_completed', userId, ip: ctx.ip }, 'password reset completed');
  }

  /** POST /auth/verify-email: the user, now verified. */
  async verifyEmail(input: { token: string }, ctx: AuditContext): Promise<PublicUser> {
    const user = await withTransaction(this.deps.pool, async (db) => {
      const now = this.deps.clock();
      const id = await this.deps.tokens.consume(db, input.token, 'email_verification', now);
      if (!id) return undefined;
      await this.deps.tokens.markEmailVerified(db, id, now);
      await this.deps.tokens.retireAll(db, id, 'email_verification', now);
      await this.deps.audit.record({ event: 'email_verified', actorId: id, targetId: id, origin: ctx }, db);
      return (await this.deps.users.findAccountById(id, db))?.user;
    });
    if (!user) throw badRequest(INVALID_EMAIL_TOKEN);
    ctx.log.info({ event: 'email_verified', userId: user.id, ip: ctx.ip }, 'email verified');
    return user;
  }
}
