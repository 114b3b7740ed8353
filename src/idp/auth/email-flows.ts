import { createHash, randomInt } from 'node:crypto';
import type { Clock } from '../../kit/clock.js';
import type { PoolClient } from '../../kit/db.js';
import type { Caller } from '../gateway.js';
import { parseEmail } from './email.js';
import { AuthError, authErrors } from './errors.js';
import { composeMail, type MailKind, type MailQueue } from './mails.js';
import { checkMetadataLimits } from './metadata.js';
import { checkPasswordTooLong, type Passwords, randomPassword } from './passwords.js';
import type { AuthRateLimits } from './rate-limits.js';
import type { RedirectPolicy } from './redirects.js';
import type { AuthRepository, OneTimeTokenType } from './repository.js';
import { type AuthService, checkStorableMetadata, type TokenResponse } from './service.js';
import { toUser, type User, type UserRow } from './user.js';

// The flows that go through a mail (GoTrue's recover.go, verify.go, resend.go, admin generateLink
// and the sign-up confirmation): a one-time token per user and kind, its link
// `<IDP_SITE_URL>/auth/v1/verify?token=<token hash>&type=<kind>&redirect_to=<url>` and its
// six-digit code. As in GoTrue the token hash is SHA-224(address + code) in hex, so a code typed
// with its address and a clicked link find the same token; the database keeps only a SHA-256 of it.

export interface EmailFlowSettings {
  /** How long a link or code stays valid (GoTrue's MAILER_OTP_EXP). */
  otpExpirySeconds: number;
  /** The idp's public API root: `<IDP_SITE_URL>/auth/v1`, where the links point. */
  apiUrl: string;
  redirects: RedirectPolicy;
  /** Queues a mail; undefined without SMTP_URL, when mails are dropped (GoTrue's no-op mailer). */
  mailQueue?: MailQueue;
  log: { error(obj: object, msg: string): void };
}

/**
 * The verification types of GoTrue's email flows; `email` is a code that may be
 * either kind. A Map, since the type comes from the client: an object would
 * answer `constructor` or `toString` with an inherited function.
 */
const TOKEN_TYPES_OF: ReadonlyMap<string, readonly OneTimeTokenType[]> = new Map([
  ['signup', ['confirmation_token']],
  ['invite', ['confirmation_token']],
  ['recovery', ['recovery_token']],
  ['magiclink', ['recovery_token']],
  ['email', ['confirmation_token', 'recovery_token']],
  ['email_change', ['email_change_token_current', 'email_change_token_new']],
]);

/** GoTrue's answer when the first of the two addresses confirmed a secure email change. */
export const SINGLE_CONFIRMATION_ACCEPTED = 'Confirmation link accepted. Please proceed to confirm link sent to the other email';

/** A verification's outcome: a session, or (first half of an email change) a message. */
export type Verified = { session: TokenResponse; type: string } | { message: string };

interface IssuedToken {
  /** The six-digit code (`email_otp`). */
  code: string;
  /** The token hash (`hashed_token`, the link's `token`). */
  hash: string;
  link: string;
}

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');
/** GoTrue's crypto.GenerateTokenHash. */
const tokenHashOf = (email: string, code: string) => createHash('sha224').update(email + code).digest('hex');

export interface VerifyParams {
  type?: string;
  token?: string;
  token_hash?: string;
  email?: string;
  phone?: string;
  redirect_to?: string;
}

export interface GenerateLinkParams {
  type?: string;
  email?: string;
  password?: string;
  data?: Record<string, unknown>;
  redirect_to?: string;
}

export type GeneratedLink = User & {
  action_link: string;
  email_otp: string;
  hashed_token: string;
  verification_type: string;
  redirect_to: string;
};

/**
 * Token writes the answer does not wait for (see recover). Beyond this many at once a request waits
 * for its own, so a flood of recoveries holds a bounded number of database connections and memory.
 */
const MAX_DETACHED = 32;

export class EmailFlows {
  private readonly detached = new Set<Promise<void>>();

  constructor(
    private readonly repo: AuthRepository,
    private readonly auth: AuthService,
    private readonly passwords: Passwords,
    private readonly limits: AuthRateLimits,
    private readonly clock: Clock,
    private readonly settings: EmailFlowSettings,
  ) {}

  private now(): Date {
    return new Date(this.clock());
  }

  /**
   * Starts `work` without the answer waiting for it, so that a request that mails costs, until its
   * answer, what one that does not costs: the answer's timing says nothing about whether the address
   * has an account. (GoTrue answers an unknown address before any write; its background mail
   * sending moves only the SMTP exchange.) A failure is logged, as a failed send would be.
   */
  private async detach(work: () => Promise<void>): Promise<void> {
    if (this.detached.size >= MAX_DETACHED) return work();
    const running = work()
      .catch((err: unknown) => this.settings.log.error({ err }, 'mail token could not be written'))
      .finally(() => this.detached.delete(running));
    this.detached.add(running);
  }

  /** Waits for the writes still running (on shutdown, before the pools close). */
  async drain(): Promise<void> {
    await Promise.all([...this.detached]);
  }

  /** Where a link for `requested` leads after /verify (an unlisted URL: the site URL). */
  redirectFor(requested: string | undefined): string {
    return this.settings.redirects.resolve(requested);
  }

  /**
   * A new token of `kind` for `user`, replacing the previous one of its type. `address`: where it
   * is mailed (the user's own, or the new one of an email change).
   */
  private async issue(
    client: PoolClient,
    user: UserRow,
    kind: MailKind,
    redirectTo: string,
    address = user.email ?? '',
    type: OneTimeTokenType = kind === 'recovery' || kind === 'magiclink' ? 'recovery_token' : 'confirmation_token',
  ): Promise<IssuedToken> {
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const hash = tokenHashOf(address, code);
    await this.repo.issueOneTimeToken(client, { userId: user.id, type, digest: sha256(hash), relatesTo: address, now: this.now() });
    const query = new URLSearchParams({ token: hash, type: kind, redirect_to: redirectTo });
    return { code, hash, link: `${this.settings.apiUrl}/verify?${query.toString()}` };
  }

  /** Issues a token and queues its mail, in the caller's transaction. */
  private async mail(client: PoolClient, user: UserRow, kind: MailKind, redirectTo: string, address?: string, type?: OneTimeTokenType): Promise<void> {
    const to = address ?? user.email ?? '';
    const token = await this.issue(client, user, kind, redirectTo, to, type);
    const queue = this.settings.mailQueue;
    if (!queue) return; // No SMTP server: the mail is dropped, as GoTrue's no-op mailer does (warned at start).
    // Queued, not sent: an SMTP outage delays the mail; only a database failure fails the request.
    await queue.enqueue(client, composeMail(kind, to, token.link, token.code));
  }

  // ---- PUT /user with a new email ----------------------------------------------------------------

  /**
   * GoTrue's secure email change (its default): the new address waits in `new_email`, and a link
   * goes to each address; the change happens when both are confirmed. The new address is limited
   * like any recipient.
   */
  async beforeEmailChange(userId: string, newEmail: string): Promise<void> {
    const owner = await this.repo.findUserByEmail(newEmail);
    if (owner && owner.id !== userId) throw authErrors.emailExists();
    await this.takeMailLimits(newEmail);
  }

  /** After beforeEmailChange: records the pending address and mails both links. */
  async requestEmailChange(user: UserRow, newEmail: string, redirectTo: string | undefined): Promise<void> {
    const target = this.redirectFor(redirectTo);
    await this.mailing(async (client) => {
      await this.repo.startEmailChange(client, user.id, newEmail, this.now());
      if (user.email) await this.mail(client, user, 'email_change', target, user.email, 'email_change_token_current');
      await this.mail(client, user, 'email_change', target, newEmail, 'email_change_token_new');
    });
  }

  /** Both mail limits for one mail to `email`: per recipient, then for the service. */
  private async takeMailLimits(email: string): Promise<void> {
    await this.limits.emailToAddress(email);
    await this.limits.emailSent();
  }

  /** Runs a transaction that queues mail, then has it sent. */
  private async mailing<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    const result = await this.repo.transaction(fn);
    this.settings.mailQueue?.committed();
    return result;
  }

  /** After the transaction that made a user and queued its confirmation committed. */
  confirmationCommitted(): void {
    this.settings.mailQueue?.committed();
  }

  /** The confirmation mail of a sign-up, inside the transaction that creates the user. */
  async confirmationMail(client: PoolClient, user: UserRow, redirectTo: string | undefined): Promise<void> {
    await this.mail(client, user, 'signup', this.redirectFor(redirectTo));
  }

  /** Both mail limits, for a sign-up that will send a confirmation. */
  async beforeConfirmationMail(email: string): Promise<void> {
    await this.takeMailLimits(email);
  }

  // ---- POST /recover ---------------------------------------------------------------------------

  /**
   * A recovery mail for the address, if it belongs to someone. The answer is `{}` either way, and
   * the limits are taken for every address, so neither the body nor a 429 tells who is registered.
   */
  async recover(rawEmail: string | undefined, redirectTo: string | undefined): Promise<Record<string, never>> {
    if (!rawEmail) throw authErrors.validation('Password recovery requires an email');
    const email = parseEmail(rawEmail);
    await this.takeMailLimits(email);
    const user = await this.repo.findUserByEmail(email);
    if (user) await this.detach(() => this.mailing((client) => this.mail(client, user, 'recovery', this.redirectFor(redirectTo))));
    return {};
  }

  // ---- POST /resend ----------------------------------------------------------------------------

  /** The sign-up confirmation again, for an address still awaiting it; `{}` for any other address. */
  async resend(params: { type?: string; email?: string; phone?: string }, redirectTo: string | undefined): Promise<Record<string, never>> {
    const type = params.type ?? '';
    if (!['signup', 'email_change', 'sms', 'phone_change'].includes(type)) {
      throw authErrors.validation('Missing one of these types: signup, email_change, sms, phone_change');
    }
    if (type === 'sms' || type === 'phone_change') throw authErrors.validation('Phone users are not supported by this identity provider');
    if (!params.email) throw authErrors.validation('An email address is required');
    const email = parseEmail(params.email);
    await this.takeMailLimits(email);
    // No email change is ever pending here (see PUT /user), so only a sign-up has something to resend.
    const user = type === 'signup' ? await this.repo.findUserByEmail(email) : undefined;
    // After the answer, as for recover: the answer does not tell an unconfirmed address from others.
    if (user && user.email_confirmed_at === null) {
      await this.detach(() => this.mailing((client) => this.mail(client, user, 'signup', this.redirectFor(redirectTo))));
    }
    return {};
  }

  // ---- POST and GET /verify --------------------------------------------------------------------

  /**
   * GoTrue's VerifyParams.Validate for a POST: a type, and either a token hash alone or a code with
   * its address. Returns the token hash and the message an unknown or expired one answers with.
   */
  private tokenOfPost(params: VerifyParams): { hash: string; notFound: 'Email link is invalid or has expired' | 'Token has expired or is invalid' } {
    if (!params.type) throw authErrors.validation('Verify requires a verification type');
    const token = params.token ?? '';
    const tokenHash = params.token_hash ?? '';
    if ((token === '') === (tokenHash === '')) throw authErrors.validation('Verify requires either a token or a token hash');
    if (token !== '') {
      if (params.phone && !params.email) throw authErrors.validation('Phone users are not supported by this identity provider');
      if (!params.email || params.phone) throw authErrors.validation('Only an email address or phone number should be provided on verify');
      let email: string;
      try {
        email = parseEmail(params.email);
      } catch {
        throw new AuthError(422, 'validation_failed', 'Invalid email format');
      }
      return { hash: tokenHashOf(email, token.replaceAll('-', '')), notFound: 'Token has expired or is invalid' };
    }
    if (params.email || params.phone || params.redirect_to) throw authErrors.validation('Only the token_hash and type should be provided');
    return { hash: tokenHash, notFound: 'Email link is invalid or has expired' };
  }

  /** POST /verify (supabase-js verifyOtp): a session for a valid token, which is then used up. */
  async verifyPost(params: VerifyParams): Promise<Verified> {
    const { hash, notFound } = this.tokenOfPost(params);
    return this.verify(params.type!, hash, notFound);
  }

  /** GET /verify (the mail's link): the type the session was made for, or the error. */
  async verifyLink(type: string | undefined, token: string | undefined): Promise<Verified> {
    if (!type) throw authErrors.validation('Verify requires a verification type');
    if (!token) throw authErrors.validation('Verify requires a token or a token hash');
    return this.verify(type, token.replaceAll('-', ''), 'Email link is invalid or has expired');
  }

  private async verify(
    type: string,
    hash: string,
    notFound: 'Email link is invalid or has expired' | 'Token has expired or is invalid',
  ): Promise<Verified> {
    const tokenTypes = TOKEN_TYPES_OF.get(type);
    if (!tokenTypes) throw authErrors.validation('Unsupported verification type');
    const now = this.now();
    const issuedAfter = new Date(now.getTime() - this.settings.otpExpirySeconds * 1000);
    const verified = await this.repo.transaction(async (client): Promise<{ message: string } | { user: UserRow; type: string }> => {
      const used = await this.repo.useOneTimeToken(client, sha256(hash), tokenTypes, issuedAfter);
      if (!used) throw authErrors.otpExpired(notFound);
      const user = await this.repo.findUserById(used.userId, client);
      // The address changed since the token was sent: it no longer proves anything.
      const expectedAddress = used.type === 'email_change_token_new' ? user?.email_change : user?.email;
      if (!user || expectedAddress !== used.relatesTo) throw authErrors.otpExpired(notFound);
      // Thrown inside the transaction: the token stays unused for when the ban is lifted.
      if (user.banned_until !== null && user.banned_until.getTime() > now.getTime()) throw authErrors.userBanned(403);
      if (type === 'email_change') {
        // The first of the two addresses: noted, no session yet (GoTrue's single confirmation).
        if (user.email_change_confirm_status === 0 && user.email) {
          await this.repo.confirmEmailChangeOnce(client, user.id, now);
          return { message: SINGLE_CONFIRMATION_ACCEPTED };
        }
        if (!(await this.repo.completeEmailChange(client, user.id, now))) throw authErrors.emailExists();
        return { user, type };
      }
      // Every kind proves the address: a sign-up or invitation is confirmed, and so is an
      // unconfirmed user who follows a recovery or magic link (GoTrue's recoverVerify).
      await this.repo.confirmEmail(client, user.id, now);
      const resolvedType = type === 'email' ? (used.type === 'recovery_token' ? 'magiclink' : 'signup') : type;
      return { user, type: resolvedType };
    });
    if ('message' in verified) return verified;
    return { session: await this.auth.startSessionAfterVerification(verified.user.id), type: verified.type };
  }

  // ---- POST /invite (supabase-js auth.admin.inviteUserByEmail) -------------------------------------

  /**
   * Creates a user for the address (random password, `invited_at`) and mails the invitation; an
   * invited user who has not accepted yet gets a new one. A confirmed address is 422 email_exists.
   */
  async invite(caller: Caller, params: { email?: string; data?: Record<string, unknown> }, redirectTo: string | undefined): Promise<User> {
    await this.auth.requireAdmin(caller);
    if (!params.email) throw authErrors.validation('An email address is required');
    const email = parseEmail(params.email);
    checkStorableMetadata('data', params.data);
    checkMetadataLimits('data', params.data);
    const target = this.redirectFor(redirectTo);
    const existing = await this.repo.findUserByEmail(email);
    if (existing && existing.email_confirmed_at !== null) throw authErrors.emailExists();
    await this.takeMailLimits(email);
    let user: UserRow | undefined;
    if (existing) {
      await this.mailing((client) => this.mail(client, existing, 'invite', target));
      user = existing;
    } else {
      const now = this.now();
      user = await this.repo.createUser(
        {
          email,
          passwordHash: await this.passwords.hash(randomPassword()),
          emailConfirmedAt: null,
          confirmationSentAt: null,
          userMetadata: { ...params.data },
          appMetadata: { provider: 'email', providers: ['email'] },
          now,
          invitedAt: now,
        },
        (client, row) => this.mail(client, row, 'invite', target),
      );
      if (!user) throw authErrors.emailExists();
      this.settings.mailQueue?.committed();
    }
    return toUser((await this.repo.findUserById(user.id)) ?? user);
  }

  // ---- POST /admin/generate_link ---------------------------------------------------------------

  /**
   * The link and code a mail would carry, returned instead of sent (secret key). signup and invite
   * create the user; recovery and magiclink need one.
   */
  async generateLink(caller: Caller, params: GenerateLinkParams, queryRedirect: string | undefined): Promise<GeneratedLink> {
    await this.auth.requireAdmin(caller);
    const type = params.type ?? '';
    if (!['signup', 'invite', 'recovery', 'magiclink'].includes(type)) {
      if (type === 'email_change_current' || type === 'email_change_new') {
        throw authErrors.validation('Email changes are not supported by this identity provider');
      }
      throw authErrors.validation('Invalid email action link type requested');
    }
    const kind = type as MailKind;
    if (!params.email) throw authErrors.validation('Invalid email format');
    const email = parseEmail(params.email);
    const requested = params.redirect_to || queryRedirect;
    const redirectTo = this.redirectFor(requested);
    checkStorableMetadata('data', params.data);
    checkMetadataLimits('data', params.data);
    const now = this.now();

    let token: IssuedToken | undefined;
    let user = await this.repo.findUserByEmail(email);
    if (kind === 'signup' || kind === 'invite') {
      if (user && (kind === 'signup' || user.email_confirmed_at !== null)) throw authErrors.emailExists();
      if (!user) {
        const password = kind === 'signup' ? params.password : undefined;
        if (kind === 'signup' && !password) throw authErrors.validation('Signup requires a valid password');
        const secret = password ?? randomPassword();
        checkPasswordTooLong(secret);
        const created = await this.repo.createUser(
          {
            email,
            passwordHash: await this.passwords.hash(secret),
            emailConfirmedAt: null,
            confirmationSentAt: null,
            userMetadata: { ...params.data },
            appMetadata: { provider: 'email', providers: ['email'] },
            now,
            invitedAt: kind === 'invite' ? now : undefined,
          },
          async (client, row) => {
            token = await this.issue(client, row, kind, redirectTo);
          },
        );
        if (!created) throw authErrors.emailExists();
        user = created;
      }
    } else if (!user) {
      throw authErrors.userNotFound();
    }
    if (!token) {
      const existing = user;
      token = await this.repo.transaction((client) => this.issue(client, existing, kind, redirectTo));
    }
    const fresh = (await this.repo.findUserById(user.id)) ?? user;
    return {
      ...toUser(fresh),
      action_link: token.link,
      email_otp: token.code,
      hashed_token: token.hash,
      verification_type: kind,
      redirect_to: redirectTo,
    };
  }
}
