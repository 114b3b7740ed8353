import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { Ipv6Prefixes } from '../kit/http/client-ip.js';
import type { Clock } from '../kit/clock.js';
import { type Pool, type PoolClient, withTransaction } from '../kit/db.js';
import type { MailOutbox } from '../kit/service.js';
import { HttpError, badRequest, forbidden, unauthorized } from '../kit/http/errors.js';
import { LoginAttempt, type LoginThrottle } from '../kit/login-throttle.js';
import { escapeHtml } from '../kit/text.js';
import type { AuditContext, AuditLog } from './audit.js';
import { type EmailFlowLimits, MAIL_NOT_CONFIGURED, tooManyMailRequests } from './email-flows.js';
import type { FactorChallenge, Factors } from './factors.js';
import { tooManyFailures } from './login-throttle.js';
import type { UsersRepository } from './repository.js';
import { ACCOUNT_BANNED, type Sessions, secretDigest, type TokenPair } from './sessions.js';
import { emailProblem, invalidField, normalizeEmail } from './validation.js';

export const EMAIL_SIGNIN_TTL_MS = 10 * 60_000;
/** Wrong codes a sign-in mail survives; the next check finds it void (its link too). */
export const EMAIL_SIGNIN_MAX_ATTEMPTS = 5;
/** RFC 8176: a one-time code (or link) sent out of band; the amr of a sign-in by mail. */
export const EMAIL_SIGNIN_AMR = 'otp';

export const EMAIL_SIGNIN_REQUESTED = 'If an account with this email exists, a sign-in link and code have been sent to it';
export const INVALID_EMAIL_SIGNIN = 'This sign-in code or link is wrong, already used or expired; request a new one';
export const EMAIL_SIGNIN_INPUT = 'Give either email and code, or token';
const CODE_FORMAT = /^\d{6}$/;
const TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/;

export interface EmailSigninOptions {
  pool: Pool;
  users: UsersRepository;
  sessions: Sessions;
  audit: AuditLog;
  factors: Factors;
  /** The login's failure budget: a wrong code counts like a wrong password, before the check. */
  throttle: LoginThrottle;
  /** The mail limits of password reset (the same counters: one mail per address per minute, whichever kind). */
  limits: EmailFlowLimits;
  ipv6: Ipv6Prefixes;
  emailDigest: (email: string) => string;
  /** Derives the key of the codes' HMAC. */
  jwtSecret: string;
  publicUrl: string;
  mail: MailOutbox | undefined;
  clock: Clock;
}

/**
 * Sign-in by mail (EMAIL_SIGNIN): one mail carries a link and a 6-digit code for one
 * token that works once, for 10 minutes. Either signs in like a password, second factor included.
 */
export class EmailSignin {
  private readonly codeKey: Buffer;

  constructor(private readonly deps: EmailSigninOptions) {
    this.codeKey = createHmac('sha256', deps.jwtSecret).update('accounts email sign-in code').digest();
  }

  private codeHash(hashOfToken: Buffer, code: string): Buffer {
    return createHmac('sha256', this.codeKey).update(hashOfToken).update(code).digest();
  }

  /** After a commit that queued mail: send it now. */
  mailQueued(): void {
    this.deps.mail?.wake();
  }

  /**
   * POST /auth/email-signin: the same answer, after the same statements, whether or not the
   * address has an account (one statement writes the token and the mail only for a known one).
   */
  async request(input: { email: string }, ctx: AuditContext): Promise<void> {
    if (!this.deps.mail) throw new HttpError(503, MAIL_NOT_CONFIGURED);
    const email = normalizeEmail(input.email);
    const problem = emailProblem(email);
    if (problem) throw invalidField('email', problem);
    const ipLimit = await this.deps.limits.perIp.consumeAddress('ip:', ctx.ip, this.deps.ipv6);
    if (ipLimit.limited) throw tooManyMailRequests(Math.max(1, ipLimit.retryAfterSeconds));
    const emailHash = this.deps.emailDigest(email);
    const addressLimit = await this.deps.limits.perAddress.consume(`address:${emailHash}`);
    if (addressLimit.limited) {
      ctx.log.info(
        { event: 'mail_request_skipped', purpose: 'email_signin', emailHash },
        'sign-in mail skipped: one was sent within the minute',
      );
      return;
    }
    const token = randomBytes(32).toString('base64url');
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const hash = secretDigest(token);
    const link = `${this.deps.publicUrl}/email-signin#token=${token}`;
    const intro = 'Someone (hopefully you) asked to sign in to the account of this address. Open this link and press “Sign in”:';
    const codeLine = `Or type this code on the sign-in page: ${code}`;
    const outro = 'The link and the code work once, for 10 minutes. If you did not ask for this, ignore this mail.';
    const now = this.deps.clock();
    const userId = await withTransaction(this.deps.pool, async (db) => {
      const { rows } = await db.query<{ user_id: string }>(
        `WITH account AS (
           SELECT id, email FROM users WHERE lower(email) = lower($1)
         ), retired AS (
           UPDATE email_tokens SET used_at = $4
           WHERE user_id IN (SELECT id FROM account) AND purpose = 'email_signin' AND used_at IS NULL
         ), token AS (
           INSERT INTO email_tokens (token_hash, purpose, user_id, created_at, expires_at, code_hash)
           SELECT $2, 'email_signin', id, $4, $5, $3 FROM account RETURNING user_id
         ), mail AS (
           INSERT INTO mail_outbox (recipient, subject, text_body, html_body)
           SELECT account.email, $6, $7, $8 FROM account JOIN token ON token.user_id = account.id
         )
         SELECT user_id FROM token`,
        [
          email,
          hash,
          this.codeHash(hash, code),
          new Date(now),
          new Date(now + EMAIL_SIGNIN_TTL_MS),
          'Your sign-in link and code',
          `${intro}\n\n${link}\n\n${codeLine}\n\n${outro}\n`,
          `<p>${escapeHtml(intro)}</p><p><a href="${escapeHtml(link)}">${escapeHtml(link)}</a></p>` +
            `<p>${escapeHtml(codeLine)}</p><p>${escapeHtml(outro)}</p>`,
        ],
      );
      const id = rows[0]?.user_id;
      // Written for every address, as for a password reset request: the same statements either way.
      await this.deps.audit.record({ event: 'email_signin_requested', targetId: id, origin: ctx, details: { email_hmac: emailHash } }, db);
      return id;
    });
    ctx.log.info({ event: 'email_signin_requested', userId, emailHash, ip: ctx.ip }, 'sign-in by mail requested');
  }

  /** POST /auth/email-signin/verify: `{email, code}` or `{token}` (the link's). */
  async verify(input: { email?: string; code?: string; token?: string }, ctx: AuditContext): Promise<TokenPair | FactorChallenge> {
    const byCode = input.email !== undefined || input.code !== undefined;
    if (byCode === (input.token !== undefined) || (byCode && (input.email === undefined || input.code === undefined))) {
      throw badRequest(EMAIL_SIGNIN_INPUT);
    }
    return byCode ? this.verifyCode(input.email!, input.code!, ctx) : this.verifyLink(input.token!, ctx);
  }

  private async verifyLink(token: string, ctx: AuditContext): Promise<TokenPair | FactorChallenge> {
    if (!TOKEN_FORMAT.test(token)) throw badRequest(INVALID_EMAIL_SIGNIN);
    const hash = secretDigest(token);
    return this.signIn(ctx, 'link', async (db, now) => {
      // A token voided by wrong codes is void for its link too.
      const { rows } = await db.query<{ user_id: string }>(
        `UPDATE email_tokens SET used_at = $2
         WHERE token_hash = $1 AND purpose = 'email_signin' AND used_at IS NULL AND expires_at > $2 AND attempts < $3
         RETURNING user_id`,
        [hash, new Date(now), EMAIL_SIGNIN_MAX_ATTEMPTS],
      );
      return rows[0]?.user_id;
    });
  }

  /**
   * The code is counted twice before it is compared: on the login's failure budget (as a
   * password guess for this address) and on the token (EMAIL_SIGNIN_MAX_ATTEMPTS), so parallel
   * guesses cannot pass either limit.
   */
  private async verifyCode(rawEmail: string, rawCode: string, ctx: AuditContext): Promise<TokenPair | FactorChallenge> {
    const email = normalizeEmail(rawEmail);
    const problem = emailProblem(email);
    if (problem) throw invalidField('email', problem);
    const code = rawCode.replace(/\s+/g, '');
    if (!CODE_FORMAT.test(code)) throw invalidField('code', 'must be the 6 digits from the mail');
    const emailHash = this.deps.emailDigest(email);
    const attempt = await this.deps.throttle.reserve(emailHash, ctx.ip);
    if (!(attempt instanceof LoginAttempt)) {
      ctx.log.warn({ event: 'login_throttled', limit: attempt.limit, emailHash, ip: ctx.ip }, 'sign-in by mail refused: too many failures');
      throw tooManyFailures(attempt.retryAfterSeconds);
    }
    try {
      const outcome = await this.signIn(
        ctx,
        'code',
        async (db, now) => {
          const { rows } = await db.query<{ token_hash: Buffer; code_hash: Buffer; user_id: string }>(
            `UPDATE email_tokens t SET attempts = t.attempts + 1
           FROM users u
           WHERE u.id = t.user_id AND lower(u.email) = lower($1) AND t.purpose = 'email_signin'
             AND t.used_at IS NULL AND t.expires_at > $2 AND t.attempts < $3
           RETURNING t.token_hash, t.code_hash, t.user_id`,
            [email, new Date(now), EMAIL_SIGNIN_MAX_ATTEMPTS],
          );
          const found = rows[0];
          if (!found || !timingSafeEqual(this.codeHash(found.token_hash, code), found.code_hash)) return undefined;
          const used = await db.query(
            "UPDATE email_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL AND purpose = 'email_signin'",
            [found.token_hash, new Date(now)],
          );
          return used.rowCount === 1 ? found.user_id : undefined;
        },
        emailHash,
      );
      await attempt.succeeded();
      return outcome;
    } catch (err) {
      // A wrong code stays counted; a check that never answered (database down) is given back.
      if (!(err instanceof HttpError)) await attempt.abandoned();
      throw err;
    }
  }

  /**
   * Spends the token (`spend` answers its user, or undefined when it is wrong, used or
   * expired) and signs in, in one transaction. A wrong code returns rather than throws,
   * so the transaction commits and the attempt stays counted on the token.
   */
  private async signIn(
    ctx: AuditContext,
    via: 'code' | 'link',
    spend: (db: PoolClient, now: number) => Promise<string | undefined>,
    emailHash?: string,
  ): Promise<TokenPair | FactorChallenge> {
    const outcome = await withTransaction(this.deps.pool, async (db): Promise<TokenPair | FactorChallenge | HttpError | undefined> => {
      const now = this.deps.clock();
      const userId = await spend(db, now);
      if (!userId) return undefined;
      // The mail reached its owner: the address is proved, as by a verification link.
      await db.query('UPDATE users SET email_verified_at = coalesce(email_verified_at, $2) WHERE id = $1', [userId, new Date(now)]);
      const account = await this.deps.users.lockAccount(db, userId, 'share');
      if (!account) return undefined;
      if (account.banned) {
        await this.deps.audit.record({ event: 'login_refused_banned', actorId: userId, targetId: userId, origin: ctx }, db);
        return forbidden(ACCOUNT_BANNED);
      }
      if (await this.deps.factors.required(db, userId)) {
        await this.deps.audit.record(
          { event: 'second_factor_required', actorId: userId, targetId: userId, origin: ctx, details: { method: 'email' } },
          db,
        );
        return this.deps.factors.challenge(db, userId, EMAIL_SIGNIN_AMR);
      }
      await this.deps.audit.record(
        { event: 'login_succeeded', actorId: userId, targetId: userId, origin: ctx, details: { method: 'email', via } },
        db,
      );
      return this.deps.sessions.start(db, account, ctx, [EMAIL_SIGNIN_AMR]);
    });
    if (outcome === undefined) {
      ctx.log.warn({ event: 'login_failed', emailHash, ip: ctx.ip, method: 'email', via }, 'sign-in by mail failed');
      await this.deps.audit.record({
        event: 'login_failed',
        origin: ctx,
        details: { method: 'email', via, reason: 'invalid_email_signin', ...(emailHash ? { email_hmac: emailHash } : {}) },
      });
      throw unauthorized(INVALID_EMAIL_SIGNIN);
    }
    if (outcome instanceof HttpError) throw outcome;
    ctx.log.info(
      { event: 'mfa_required' in outcome ? 'second_factor_required' : 'login_succeeded', ip: ctx.ip, method: 'email' },
      'sign-in by mail',
    );
    return outcome;
  }
}
