import { createHash, randomBytes, randomInt, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../../kit/clock.js';
import type { Authentication } from './authentication.js';
import type { PoolClient } from '../../kit/db.js';
import type { Caller } from '../gateway.js';
import { parseEmail } from './email.js';
import { AuthError, authErrors } from './errors.js';
import { composeMail, type MailKind, type MailQueue, type MailSettings, reauthenticationMail } from './mails.js';
import { checkMetadataLimits, checkStorableMetadata } from './metadata.js';
import { checkPasswordTooLong, type Passwords, randomPassword } from './passwords.js';
import type { OtpLimits } from './otp-limits.js';
import type { AuthRateLimits } from './rate-limits.js';
import type { RedirectPolicy } from './redirects.js';
import type { OneTimeTokenType } from './store/one-time-tokens.js';
import type { AuthStores } from './store/stores.js';
import { type Sessions, sha256, type TokenResponse } from './sessions.js';
import { toUser, type User, type UserRow } from './user.js';

// The flows that go through a mail (GoTrue's recover.go, verify.go, resend.go, admin generateLink
// and the sign-up confirmation): a one-time token per user and kind, its link
// `<IDP_SITE_URL>/auth/v1/verify?token=<token hash>&type=<kind>&redirect_to=<url>` and its
// six-digit code. Unlike GoTrue, whose token hash is SHA-224(address + code), the link's token hash
// is random (224 bits, same form): derived from the code, it could be found by trying the million
// codes' hashes without naming the account. A code is typed with its address, so its tries are
// counted per token and per account (OtpLimits). The database keeps only SHA-256 digests of both.

export interface EmailFlowSettings {
  /** How long a link or code stays valid (GoTrue's MAILER_OTP_EXP). */
  otpExpirySeconds: number;
  /** The idp's public API root: `<IDP_SITE_URL>/auth/v1`, where the links point. */
  apiUrl: string;
  redirects: RedirectPolicy;
  /** Queues a mail; undefined without SMTP_URL, when mails are dropped (GoTrue's no-op mailer). */
  mailQueue?: MailQueue;
  /** The mails' wording and links. */
  mails: MailSettings;
  /** Counts the codes tried per token and per account. */
  otpLimits: OtpLimits;
  log: { error(obj: object, msg: string): void; warn(msg: string): void };
  /** IDP_AUTOCONFIRM: a user POST /otp creates is confirmed at once and mailed a magic link. */
  autoconfirm: boolean;
  /** IDP_DISABLE_SIGNUP: POST /otp creates no user either. */
  disableSignup: boolean;
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

/**
 * A verification's outcome: a session, or (first half of an email change) a message, or (the link
 * of a mail requested with a PKCE challenge) the auth code the app exchanges for the session.
 */
export type Verified = { session: TokenResponse; type: string } | { message: string } | { authCode: string };

/** A PKCE code challenge sent with a request that mails a link (supabase-js flowType 'pkce'). */
export interface Pkce {
  challenge: string;
  method: 's256' | 'plain';
}

/** GoTrue's FlowStateExpiryDuration default: how long an auth code may wait for its exchange. */
const FLOW_STATE_EXPIRY_MS = 300_000;
/** The prefix GoTrue puts on the token of a PKCE mail's link, so that /verify answers with a code. */
const PKCE_PREFIX = 'pkce_';
const CODE_CHALLENGE = /^[A-Za-z0-9._~-]{43,128}$/;

/**
 * GoTrue's validatePKCEParams and ParseCodeChallengeMethod: both or neither (supabase-js sends null
 * for both in its implicit flow), a challenge of 43 to 128 URL-safe characters, s256 or plain.
 */
export function parsePkce(challenge: unknown, method: unknown): Pkce | undefined {
  const c = typeof challenge === 'string' ? challenge : '';
  const m = typeof method === 'string' ? method.toLowerCase() : '';
  if ((c === '') !== (m === '')) throw authErrors.validation('PKCE flow requires code_challenge_method and code_challenge');
  if (c === '') return undefined;
  if (!CODE_CHALLENGE.test(c)) {
    throw authErrors.validation(
      'code challenge has to be between 43 and 128 characters long and contain only alphanumeric characters, hyphens, periods, underscores and tildes',
    );
  }
  if (m !== 's256' && m !== 'plain')
    throw authErrors.validation("unsupported code_challenge_method, supported methods are 'plain' or 's256'");
  return { challenge: c, method: m };
}

interface IssuedToken {
  /** The six-digit code (`email_otp`). */
  code: string;
  /** The token hash (`hashed_token`, the link's `token`). */
  hash: string;
  link: string;
}

/** GoTrue's crypto.GenerateTokenHash. */
const tokenHashOf = (email: string, code: string) =>
  createHash('sha224')
    .update(email + code)
    .digest('hex');

type NotFound = 'Email link is invalid or has expired' | 'Token has expired or is invalid';

export interface VerifyParams {
  type?: string;
  token?: string;
  token_hash?: string;
  email?: string;
  phone?: string;
  redirect_to?: string;
}

export interface OtpParams {
  email?: string;
  phone?: string;
  create_user?: boolean;
  data?: Record<string, unknown>;
  channel?: string;
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
    private readonly stores: AuthStores,
    private readonly sessions: Sessions,
    private readonly authentication: Authentication,
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
    kind: MailKind | 'reauthentication',
    redirectTo: string,
    address = user.email ?? '',
    type: OneTimeTokenType = kind === 'recovery' || kind === 'magiclink' ? 'recovery_token' : 'confirmation_token',
    pkce?: Pkce,
  ): Promise<IssuedToken> {
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const hash = randomBytes(28).toString('hex');
    await this.stores.oneTimeTokens.issueOneTimeToken(client, {
      userId: user.id,
      type,
      digest: sha256(hash),
      codeDigest: sha256(tokenHashOf(address, code)),
      relatesTo: address,
      now: this.now(),
    });
    if (pkce) {
      await this.stores.flowStates.createFlowState(client, {
        userId: user.id,
        challenge: pkce.challenge,
        method: pkce.method,
        authenticationMethod: kind,
        now: this.now(),
      });
    }
    const query = new URLSearchParams({ token: pkce ? PKCE_PREFIX + hash : hash, type: kind, redirect_to: redirectTo });
    return { code, hash, link: `${this.settings.apiUrl}/verify?${query.toString()}` };
  }

  /** Issues a token and queues its mail, in the caller's transaction. */
  private async mail(
    client: PoolClient,
    user: UserRow,
    kind: MailKind,
    redirectTo: string,
    address?: string,
    type?: OneTimeTokenType,
    pkce?: Pkce,
  ): Promise<void> {
    const to = address ?? user.email ?? '';
    const token = await this.issue(client, user, kind, redirectTo, to, type, pkce);
    const queue = this.settings.mailQueue;
    if (!queue) return; // No SMTP server: the mail is dropped, as GoTrue's no-op mailer does (warned at start).
    // Queued, not sent: an SMTP outage delays the mail; only a database failure fails the request.
    const mail = composeMail(kind, to, { code: token.code, hash: token.hash, verifyLink: token.link, redirectTo }, this.settings.mails);
    await queue.enqueue(client, mail);
  }

  // ---- PUT /user with a new email ----------------------------------------------------------------

  /**
   * GoTrue's secure email change (its default): the new address waits in `new_email`, and a link
   * goes to each address; the change happens when both are confirmed. The new address is limited
   * like any recipient.
   */
  async beforeEmailChange(userId: string, newEmail: string): Promise<void> {
    const owner = await this.stores.users.findUserByEmail(newEmail);
    if (owner && owner.id !== userId) throw authErrors.emailExists();
    await this.takeMailLimits(newEmail);
  }

  /** After beforeEmailChange: records the pending address and mails both links. */
  async requestEmailChange(user: UserRow, newEmail: string, redirectTo: string | undefined): Promise<void> {
    const target = this.redirectFor(redirectTo);
    await this.mailing(async (client) => {
      await this.stores.users.startEmailChange(client, user.id, newEmail, this.now());
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
    const result = await this.stores.transaction(fn);
    this.settings.mailQueue?.committed();
    return result;
  }

  /** After the transaction that made a user and queued its confirmation committed. */
  confirmationCommitted(): void {
    this.settings.mailQueue?.committed();
  }

  /** The confirmation mail of a sign-up, inside the transaction that creates the user. */
  async confirmationMail(client: PoolClient, user: UserRow, redirectTo: string | undefined, pkce?: Pkce): Promise<void> {
    await this.mail(client, user, 'signup', this.redirectFor(redirectTo), undefined, undefined, pkce);
  }

  /** Both mail limits, for a sign-up that will send a confirmation. */
  async beforeConfirmationMail(email: string): Promise<void> {
    await this.takeMailLimits(email);
  }

  // ---- POST /recover ---------------------------------------------------------------------------

  /**
   * A recovery mail for the address, if it belongs to someone. The answer is `{}` either way: the
   * per-recipient limit is taken for every address, so neither the body nor a 429 tells who is
   * registered. The service's hourly mail quota is charged only for a mail that is sent, after the
   * answer, so made-up addresses cannot spend it; when it is spent the mail is dropped, and the
   * answer is still `{}`, as for an unknown address.
   */
  async recover(rawEmail: string | undefined, redirectTo: string | undefined, pkce?: Pkce): Promise<Record<string, never>> {
    if (!rawEmail) throw authErrors.validation('Password recovery requires an email');
    const email = parseEmail(rawEmail);
    await this.limits.emailToAddress(email);
    const user = await this.stores.users.findUserByEmail(email);
    if (user) await this.detach(() => this.mailIfQuota(user, 'recovery', this.redirectFor(redirectTo), pkce));
    return {};
  }

  /** Issues and queues a mail whose request was already answered, if the hour's quota allows it. */
  private async mailIfQuota(user: UserRow, kind: MailKind, redirectTo: string, pkce?: Pkce): Promise<void> {
    // No SMTP server: nothing is sent, so nothing is charged (the token is still written, as GoTrue's no-op mailer).
    if (this.settings.mailQueue && !(await this.limits.emailQuotaTaken())) {
      this.settings.log.warn('a mail was not sent: the hourly mail quota (IDP_RATE_LIMIT_EMAIL_SENT) is spent');
      return;
    }
    await this.mailing((client) => this.mail(client, user, kind, redirectTo, undefined, undefined, pkce));
  }

  // ---- POST /otp (supabase-js signInWithOtp) ------------------------------------------------------

  /**
   * GoTrue's Otp and MagicLink: a confirmed user is mailed a magic link (link and code); an unknown
   * address, unless `create_user` is false, becomes a user as a sign-up with a random password
   * would, and is mailed the sign-up confirmation (which signs in like a magic link) or, with
   * IDP_AUTOCONFIRM, is confirmed at once and mailed a magic link; a user still unconfirmed gets
   * the same mail a new one would. `create_user: false` with an unknown address is 422 otp_disabled,
   * as in GoTrue, which tells that nobody has the address.
   */
  async signInWithOtp(params: OtpParams, redirectTo: string | undefined, pkce?: Pkce): Promise<Record<string, never>> {
    if (params.email && params.phone) throw authErrors.validation('Only an email address or phone number should be provided');
    if (params.email && params.channel) throw authErrors.validation('Channel should only be specified with Phone OTP');
    if (params.phone) throw authErrors.phoneUnsupported();
    if (!params.email) throw authErrors.validation('One of email or phone must be set');
    const email = parseEmail(params.email);
    const data = params.data ?? {};
    checkStorableMetadata('data', data);
    checkMetadataLimits('data', data);
    const target = this.redirectFor(redirectTo);

    const user = await this.stores.users.findUserByEmail(email);
    if (!user && params.create_user === false) throw new AuthError(422, 'otp_disabled', 'Signups not allowed for otp');
    // An unconfirmed user goes through sign-up again in GoTrue, so DISABLE_SIGNUP refuses it too.
    if ((!user || user.email_confirmed_at === null) && this.settings.disableSignup) throw authErrors.signupDisabled();
    await this.takeMailLimits(email);
    if (user) {
      await this.mailing((client) => this.mail(client, user, this.otpMailKind(user), target, undefined, undefined, pkce));
      return {};
    }

    const now = this.now();
    const confirmed = this.settings.autoconfirm;
    const created = await this.stores.users.createUser(
      {
        email,
        passwordHash: await this.passwords.hash(randomPassword()),
        emailConfirmedAt: confirmed ? now : null,
        confirmationSentAt: confirmed ? null : now,
        userMetadata: confirmed ? { ...data, email_verified: true } : { ...data },
        appMetadata: { provider: 'email', providers: ['email'] },
        identityData: data,
        now,
      },
      (client, row) => this.mail(client, row, confirmed ? 'magiclink' : 'signup', target, undefined, undefined, pkce),
    );
    if (created) {
      this.settings.mailQueue?.committed();
      return {};
    }
    // A concurrent request created the address first: mail its user as an existing one.
    const winner = await this.stores.users.findUserByEmail(email);
    if (!winner) throw authErrors.unexpected('Database error saving new user');
    await this.mailing((client) => this.mail(client, winner, this.otpMailKind(winner), target, undefined, undefined, pkce));
    return {};
  }

  /** A confirmed user's sign-in mail is a magic link; an unconfirmed one's, the sign-up confirmation. */
  private otpMailKind(user: UserRow): MailKind {
    return user.email_confirmed_at !== null || this.settings.autoconfirm ? 'magiclink' : 'signup';
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
    await this.limits.emailToAddress(email);
    // No email change is ever pending here (see PUT /user), so only a sign-up has something to resend.
    const user = type === 'signup' ? await this.stores.users.findUserByEmail(email) : undefined;
    // After the answer, as for recover: the answer does not tell an unconfirmed address from others.
    if (user && user.email_confirmed_at === null) {
      await this.detach(() => this.mailIfQuota(user, 'signup', this.redirectFor(redirectTo)));
    }
    return {};
  }

  // ---- POST and GET /verify --------------------------------------------------------------------

  /**
   * GoTrue's VerifyParams.Validate for a POST: a type, and either a token hash alone or a code with
   * its address. Returns the token hash and the message an unknown or expired one answers with.
   */
  private tokenOfPost(params: VerifyParams): { hash: string } | { email: string; code: string } {
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
      return { email, code: token.replaceAll('-', '') };
    }
    if (params.email || params.phone || params.redirect_to) throw authErrors.validation('Only the token_hash and type should be provided');
    return { hash: tokenHash };
  }

  /** POST /verify (supabase-js verifyOtp): a session for a valid token, which is then used up. */
  async verifyPost(params: VerifyParams): Promise<Verified> {
    const token = this.tokenOfPost(params);
    if ('hash' in token) return this.verifyHash(params.type!, token.hash, 'Email link is invalid or has expired');
    return this.verifyCode(params.type!, token.email, token.code);
  }

  /** GET /verify (the mail's link): the type the session was made for, or the error. */
  async verifyLink(type: string | undefined, token: string | undefined): Promise<Verified> {
    if (!type) throw authErrors.validation('Verify requires a verification type');
    if (!token) throw authErrors.validation('Verify requires a token or a token hash');
    const pkce = token.startsWith(PKCE_PREFIX);
    const hash = (pkce ? token.slice(PKCE_PREFIX.length) : token).replaceAll('-', '');
    return this.verifyHash(type, hash, 'Email link is invalid or has expired', pkce);
  }

  private tokenTypesOf(type: string): readonly OneTimeTokenType[] {
    const tokenTypes = TOKEN_TYPES_OF.get(type);
    if (!tokenTypes) throw authErrors.validation('Unsupported verification type');
    return tokenTypes;
  }

  private issuedAfter(): Date {
    return new Date(this.clock() - this.settings.otpExpirySeconds * 1000);
  }

  /** A link's token (or a token_hash): random, so there is nothing to count. */
  private verifyHash(type: string, hash: string, notFound: NotFound, pkce = false): Promise<Verified> {
    const tokenTypes = this.tokenTypesOf(type);
    const issuedAfter = this.issuedAfter();
    return this.verify(
      type,
      notFound,
      (client) => this.stores.oneTimeTokens.useOneTimeToken(client, sha256(hash), tokenTypes, issuedAfter),
      pkce,
    );
  }

  /**
   * A code typed with its address. The attempt is counted for the account and for each live token
   * mailed there before the code is compared; a token that has had its tries is voided, so even
   * its right code then fails.
   */
  private async verifyCode(type: string, email: string, code: string): Promise<Verified> {
    const notFound = 'Token has expired or is invalid';
    const tokenTypes = this.tokenTypesOf(type);
    const issuedAfter = this.issuedAfter();
    const { open, spent } = await this.countCodeAttempt(email, tokenTypes, issuedAfter);
    try {
      if (open.length === 0) throw authErrors.otpExpired(notFound);
      return await this.verify(type, notFound, (client) =>
        this.stores.oneTimeTokens.useOneTimeCode(client, open, sha256(tokenHashOf(email, code)), tokenTypes, issuedAfter),
      );
    } catch (err) {
      // A wrong code on a token's last try: it is voided now (a right one has used it up already).
      if (spent.length > 0 && err instanceof AuthError && err.code === 'otp_expired')
        await this.stores.oneTimeTokens.voidOneTimeTokens(spent);
      throw err;
    }
  }

  /**
   * One code typed for `email`, counted before it is compared: for the account (429 past the hour's
   * tries), then for each live token of `tokenTypes` mailed there. `open`: the tokens it may still
   * be compared with; `spent`: those this try used up, voided if the code turns out wrong.
   */
  private async countCodeAttempt(
    email: string,
    tokenTypes: readonly OneTimeTokenType[],
    issuedAfter: Date,
  ): Promise<{ open: string[]; spent: string[] }> {
    await this.settings.otpLimits.accountAttempt(email);
    const live = await this.stores.oneTimeTokens.liveTokensMailedTo(email, tokenTypes, issuedAfter);
    const open: string[] = [];
    const spent: string[] = [];
    for (const token of live) {
      const attempt = await this.settings.otpLimits.tokenAttempt(token);
      if (attempt.allowed) open.push(token);
      if (!attempt.allowed || attempt.last) spent.push(token);
    }
    return { open, spent };
  }

  // ---- GET /reauthenticate, and its nonce in PUT /user -------------------------------------------

  /**
   * GoTrue's reauthenticate: mails the signed-in user a six-digit nonce, which a password change
   * from a session older than a day must carry (IDP_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION). A new
   * one replaces the older, and both mail limits apply as to any mail.
   */
  async reauthenticate(user: UserRow): Promise<Record<string, never>> {
    const email = user.email;
    if (!email) throw authErrors.validation('Reauthentication requires the user to have an email');
    await this.takeMailLimits(email);
    await this.mailing(async (client) => {
      const token = await this.issue(client, user, 'reauthentication', this.redirectFor(undefined), email, 'reauthentication_token');
      await this.settings.mailQueue?.enqueue(client, reauthenticationMail(email, token.code, this.settings.mails));
    });
    return {};
  }

  /**
   * Uses the user's reauthentication nonce, counted as any typed code (five tries void it); throws
   * 422 reauthentication_not_valid for a wrong, used or expired one, as GoTrue.
   */
  async useReauthenticationNonce(user: UserRow, nonce: string): Promise<void> {
    const email = user.email ?? '';
    const types: readonly OneTimeTokenType[] = ['reauthentication_token'];
    const issuedAfter = this.issuedAfter();
    const { open, spent } = await this.countCodeAttempt(email, types, issuedAfter);
    const used =
      open.length > 0 &&
      (await this.stores.transaction((client) =>
        this.stores.oneTimeTokens.useOneTimeCode(client, open, sha256(tokenHashOf(email, nonce)), types, issuedAfter),
      ));
    if (used && used.userId === user.id) return;
    if (spent.length > 0) await this.stores.oneTimeTokens.voidOneTimeTokens(spent);
    throw new AuthError(422, 'reauthentication_not_valid', 'Requested nonce is invalid or expired');
  }

  private async verify(
    type: string,
    notFound: NotFound,
    use: (client: PoolClient) => Promise<{ userId: string; type: OneTimeTokenType; relatesTo: string } | undefined>,
    pkce = false,
  ): Promise<Verified> {
    const now = this.now();
    type Outcome = { message: string } | { user: UserRow; type: string } | { authCode: string };
    const verified = await this.stores.transaction(async (client): Promise<Outcome> => {
      const used = await use(client);
      if (!used) throw authErrors.otpExpired(notFound);
      const user = await this.stores.users.findUserById(used.userId, client);
      // The address changed since the token was sent: it no longer proves anything.
      const expectedAddress = used.type === 'email_change_token_new' ? user?.email_change : user?.email;
      if (!user || expectedAddress !== used.relatesTo) throw authErrors.otpExpired(notFound);
      // Thrown inside the transaction: the token stays unused for when the ban is lifted.
      if (user.banned_until !== null && user.banned_until.getTime() > now.getTime()) throw authErrors.userBanned(403);
      if (type === 'email_change') {
        // The first of the two addresses: noted, no session yet (GoTrue's single confirmation).
        if (user.email_change_confirm_status === 0 && user.email) {
          await this.stores.users.confirmEmailChangeOnce(client, user.id, now);
          return { message: SINGLE_CONFIRMATION_ACCEPTED };
        }
        if (!(await this.stores.users.completeEmailChange(client, user.id, now))) throw authErrors.emailExists();
        return { user, type };
      }
      // Every kind proves the address: a sign-up or invitation is confirmed, and so is an
      // unconfirmed user who follows a recovery or magic link (GoTrue's recoverVerify).
      await this.stores.users.confirmEmail(client, user.id, now);
      if (pkce) {
        // GoTrue's PKCE verify: no session here; the app exchanges the code with its verifier.
        const authCode = randomUUID();
        if (!(await this.stores.flowStates.issueAuthCode(client, user.id, type, sha256(authCode), this.issuedAfter(), now))) {
          throw new AuthError(404, 'flow_state_not_found', 'No flow state found');
        }
        return { authCode };
      }
      const resolvedType = type === 'email' ? (used.type === 'recovery_token' ? 'magiclink' : 'signup') : type;
      return { user, type: resolvedType };
    });
    if ('message' in verified || 'authCode' in verified) return verified;
    return { session: await this.sessions.startAfterVerification(verified.user.id), type: verified.type };
  }

  // ---- POST /token?grant_type=pkce (supabase-js exchangeCodeForSession) ---------------------------

  /**
   * GoTrue's PKCE grant: the auth code a PKCE link's verification gave, with the verifier whose
   * challenge the mail request sent, for a session, once. A wrong verifier leaves the code usable.
   */
  async exchangeAuthCode(params: { auth_code?: string; code_verifier?: string }): Promise<TokenResponse> {
    const authCode = params.auth_code ?? '';
    const verifier = params.code_verifier ?? '';
    if (authCode === '' || verifier === '') {
      throw authErrors.validation('invalid request: both auth code and code verifier should be non-empty');
    }
    const notFound = () => new AuthError(404, 'flow_state_not_found', 'invalid flow state, no valid flow state found');
    const flow = await this.stores.flowStates.findFlowStateByCode(sha256(authCode));
    if (!flow) throw notFound();
    if (this.clock() > flow.issuedAt.getTime() + FLOW_STATE_EXPIRY_MS) {
      throw new AuthError(422, 'flow_state_expired', 'invalid flow state, flow state has expired');
    }
    const expected = Buffer.from(flow.challenge);
    const given = Buffer.from(flow.method === 's256' ? createHash('sha256').update(verifier).digest('base64url') : verifier);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
      throw new AuthError(400, 'bad_code_verifier', 'code challenge does not match previously saved code verifier');
    }
    // A ban laid after the link was followed still stops the exchange, as GoTrue's grant checks
    // the user before it issues the session.
    const user = await this.stores.users.findUserById(flow.userId);
    if (!user) throw notFound();
    if (user.banned_until !== null && user.banned_until.getTime() > this.clock()) throw authErrors.userBanned();
    // Of concurrent exchanges, the one that deletes the row gets the session.
    if (!(await this.stores.flowStates.deleteFlowState(flow.id))) throw notFound();
    return this.sessions.startAfterVerification(flow.userId);
  }

  // ---- POST /invite (supabase-js auth.admin.inviteUserByEmail) -------------------------------------

  /**
   * Creates a user for the address (random password, `invited_at`) and mails the invitation; an
   * invited user who has not accepted yet gets a new one. A confirmed address is 422 email_exists.
   */
  async invite(caller: Caller, params: { email?: string; data?: Record<string, unknown> }, redirectTo: string | undefined): Promise<User> {
    await this.authentication.requireAdmin(caller);
    if (!params.email) throw authErrors.validation('An email address is required');
    const email = parseEmail(params.email);
    checkStorableMetadata('data', params.data);
    checkMetadataLimits('data', params.data);
    const target = this.redirectFor(redirectTo);
    const existing = await this.stores.users.findUserByEmail(email);
    if (existing && existing.email_confirmed_at !== null) throw authErrors.emailExists();
    await this.takeMailLimits(email);
    let user: UserRow | undefined;
    if (existing) {
      await this.mailing((client) => this.mail(client, existing, 'invite', target));
      user = existing;
    } else {
      const now = this.now();
      user = await this.stores.users.createUser(
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
    return toUser((await this.stores.users.findUserById(user.id)) ?? user);
  }

  // ---- POST /admin/generate_link ---------------------------------------------------------------

  /**
   * The link and code a mail would carry, returned instead of sent (secret key). signup and invite
   * create the user; recovery and magiclink need one.
   */
  async generateLink(caller: Caller, params: GenerateLinkParams, queryRedirect: string | undefined): Promise<GeneratedLink> {
    await this.authentication.requireAdmin(caller);
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
    let user = await this.stores.users.findUserByEmail(email);
    if (kind === 'signup' || kind === 'invite') {
      if (user && (kind === 'signup' || user.email_confirmed_at !== null)) throw authErrors.emailExists();
      if (!user) {
        const password = kind === 'signup' ? params.password : undefined;
        if (kind === 'signup' && !password) throw authErrors.validation('Signup requires a valid password');
        const secret = password ?? randomPassword();
        checkPasswordTooLong(secret);
        const created = await this.stores.users.createUser(
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
      token = await this.stores.transaction((client) => this.issue(client, existing, kind, redirectTo));
    }
    const fresh = (await this.stores.users.findUserById(user.id)) ?? user;
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
