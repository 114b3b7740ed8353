import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import type { Clock } from '../../kit/clock.js';
import type { PoolClient } from '../../kit/db.js';
import { isStorableText } from '../../kit/text.js';
import type { Caller } from '../gateway.js';
import { ACCESS_TOKEN_AUDIENCE, type SigningKeys, type VerifiedClaims, type TokenProblem } from '../keys.js';
import { parseEmail } from './email.js';
import { AuthError, authErrors, OAuthError } from './errors.js';
import { checkMetadataLimits } from './metadata.js';
import { checkPasswordTooLong, type Passwords, passwordWeakness, randomPassword } from './passwords.js';
import type { Pkce } from './email-flows.js';
import type { SessionRow } from './store/sessions.js';
import type { AuthStores } from './store/stores.js';
import { goTime, toUser, type User, type UserRow } from './user.js';

export interface TokenResponse {
  access_token: string;
  token_type: 'bearer';
  expires_in: number;
  /** Unix seconds, equal to the access token's `exp`. */
  expires_at: number;
  refresh_token: string;
  user: User;
  weak_password?: { message: string; reasons: string[] };
}

export interface AuthSettings {
  autoconfirm: boolean;
  /** GoTrue's DISABLE_SIGNUP: POST /signup refused, email and anonymous alike. */
  disableSignup: boolean;
  /** GoTrue's EXTERNAL_ANONYMOUS_USERS_ENABLED. */
  anonymousUsers: boolean;
  jwtExpirySeconds: number;
  issuer: string;
  /** Derives each refresh token from the one it replaces (see rotateRefreshToken). */
  refreshTokenKey: Buffer;
  /** How long after a rotation the replaced token still gets the current one back (see refresh). */
  refreshTokenReuseIntervalSeconds: number;
  /** The sign-up confirmation mail (email-flows.ts); set once the flows exist. */
  confirmation?: ConfirmationMail;
}

export interface ConfirmationMail {
  /** Takes the mail limits for the address; throws 429 when no mail may go out. */
  before(email: string): Promise<void>;
  /** Issues the confirmation token and queues its mail in the transaction that made the user. */
  send(client: PoolClient, user: UserRow, redirectTo: string | undefined, pkce?: Pkce): Promise<void>;
  /** That transaction committed: the mail may go. */
  committed(): void;
}

export interface Logger {
  info(obj: object, msg: string): void;
}

const ADMIN_ROLES = new Set(['service_role', 'supabase_admin']);
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const EMAIL_APP_METADATA = { provider: 'email', providers: ['email'] };

/** The providers GoTrue's GET /settings lists under `external`, in its order. */
const EXTERNAL_PROVIDERS = [
  'anonymous_users',
  'apple',
  'azure',
  'bitbucket',
  'discord',
  'facebook',
  'snapchat',
  'figma',
  'fly',
  'github',
  'gitlab',
  'google',
  'keycloak',
  'kakao',
  'linkedin',
  'linkedin_oidc',
  'notion',
  'spotify',
  'slack',
  'slack_oidc',
  'workos',
  'twitch',
  'twitter',
  'email',
  'phone',
  'zoom',
] as const;

export interface PublicSettings {
  external: Record<string, boolean>;
  disable_signup: boolean;
  mailer_autoconfirm: boolean;
  phone_autoconfirm: boolean;
  sms_provider: string;
  saml_enabled: boolean;
  saml_private_key_next_configured: boolean;
  passkeys_enabled: boolean;
}

/** The amr method of a session's tokens, as GoTrue names it. */
type AuthMethod = 'password' | 'otp' | 'anonymous';

export type LogoutScope = 'global' | 'local' | 'others';

export const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** A new opaque refresh token; only its SHA-256 is stored. */
export const newRefreshToken = () => randomBytes(32).toString('base64url');

/** What GoTrue's JWT library says about a refused token, after "invalid JWT: unable to parse or verify signature, ". */
function jwtReason(problem: TokenProblem): string {
  switch (problem.kind) {
    case 'malformed':
      return `token is malformed: ${problem.reason}`;
    case 'unverifiable':
      return `token is unverifiable: ${problem.reason}`;
    case 'signature':
      return `token signature is invalid: ${problem.reason}`;
    case 'expired':
      return 'token has invalid claims: token is expired';
    case 'not_yet_valid':
      return 'token has invalid claims: token is not valid yet';
    case 'issued_in_future':
      return 'token has invalid claims: token used before issued';
  }
}

/**
 * Metadata PostgreSQL cannot store is the caller's error: a 400 instead of a 500. jsonb holds
 * neither U+0000 (22P05) nor an unpaired surrogate (22P02) in any string or key.
 */
export function checkStorableMetadata(field: string, value: unknown): void {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') {
      if (!isStorableText(item)) throw authErrors.validation(`${field} cannot contain U+0000 or unpaired surrogates`);
    } else if (typeof item === 'object' && item !== null) {
      for (const [key, inner] of Object.entries(item)) pending.push(key, inner);
    }
  }
}

export class AuthService {
  constructor(
    private readonly stores: AuthStores,
    private readonly keys: SigningKeys,
    private readonly passwords: Passwords,
    private readonly clock: Clock,
    private readonly settings: AuthSettings,
    private readonly log: Logger,
  ) {}

  private now(): Date {
    return new Date(this.clock());
  }

  /** Sign-ups awaiting confirmation get their mail through this (the mail flows need this service first). */
  useConfirmationMail(confirmation: ConfirmationMail): void {
    this.settings.confirmation = confirmation;
  }

  // ---- sign-up and sign-in ----------------------------------------------------------------

  /** GET /settings: GoTrue's Settings, with what this idp offers (email only, besides anonymous sign-ins). */
  publicSettings(): PublicSettings {
    const external: Record<string, boolean> = {};
    for (const provider of EXTERNAL_PROVIDERS) external[provider] = false;
    external.anonymous_users = this.settings.anonymousUsers;
    external.email = true;
    return {
      external,
      disable_signup: this.settings.disableSignup,
      mailer_autoconfirm: this.settings.autoconfirm,
      phone_autoconfirm: false,
      sms_provider: '',
      saml_enabled: false,
      saml_private_key_next_configured: false,
      passkeys_enabled: false,
    };
  }

  /** GoTrue's router: a sign-up body without email and phone is an anonymous sign-in. */
  static isAnonymousSignUp(input: { email?: string; phone?: string }): boolean {
    return !input.email && !input.phone;
  }

  /** Checked before the anonymous sign-in limit is taken, as GoTrue's router does. */
  requireAnonymousSignIns(): void {
    if (!this.settings.anonymousUsers) throw authErrors.anonymousDisabled();
  }

  /**
   * GoTrue's SignupAnonymously: a user with no email, password or identity, `is_anonymous` true,
   * `data` as its user_metadata, and a session at once (amr `anonymous`).
   */
  async signUpAnonymously(input: { data?: Record<string, unknown> }): Promise<TokenResponse> {
    this.requireAnonymousSignIns();
    if (this.settings.disableSignup) throw authErrors.signupDisabled();
    const data = input.data ?? {};
    checkStorableMetadata('data', data);
    checkMetadataLimits('data', data);
    const user = await this.stores.users.createAnonymousUser(data, this.now());
    return this.newSession(user.id, 'anonymous');
  }

  /** A session (autoconfirm) or a bare user (confirmation pending, or the anti-enumeration reply). */
  async signUp(
    input: { email?: string; phone?: string; password?: string; data?: Record<string, unknown> },
    redirectTo?: string,
    pkce?: Pkce,
  ): Promise<TokenResponse | User> {
    if (AuthService.isAnonymousSignUp(input)) return this.signUpAnonymously(input);
    if (this.settings.disableSignup) throw authErrors.signupDisabled();
    const rawEmail = input.email ?? '';
    if (rawEmail === '') throw authErrors.phoneDisabled();
    const password = input.password ?? '';
    if (password === '') throw authErrors.validation('Signup requires a valid password');
    checkPasswordTooLong(password);
    const weakness = passwordWeakness(password);
    if (weakness) throw authErrors.weakPassword(weakness.message, weakness.reasons);
    const email = parseEmail(rawEmail);
    const data = input.data ?? {};
    checkStorableMetadata('data', data);
    checkMetadataLimits('data', data);

    // Hashing first means every branch below costs one bcrypt, whether or not the address is taken.
    const passwordHash = await this.passwords.hash(password);
    const now = this.now();
    const existing = await this.stores.users.findUserByEmail(email);
    if (existing) return this.signUpExisting(existing, email, data, now, redirectTo, pkce);

    const confirmed = this.settings.autoconfirm;
    const confirmation = this.settings.confirmation;
    if (!confirmed) await confirmation?.before(email);
    const created = await this.stores.users.createUser(
      {
        email,
        passwordHash,
        emailConfirmedAt: confirmed ? now : null,
        confirmationSentAt: confirmed ? null : now,
        userMetadata: confirmed ? { ...data, email_verified: true } : { ...data },
        appMetadata: { ...EMAIL_APP_METADATA },
        identityData: data,
        now,
      },
      confirmed || !confirmation ? undefined : (client, user) => confirmation.send(client, user, redirectTo, pkce),
    );
    // Lost a race with a concurrent signup of the same address: answer as if it existed before.
    if (created === undefined) {
      const winner = await this.stores.users.findUserByEmail(email);
      if (winner) return this.signUpExisting(winner, email, data, now, redirectTo, pkce);
      throw authErrors.unexpected('Database error saving new user');
    }
    if (!confirmed) {
      confirmation?.committed();
      return toUser(created);
    }
    return this.startSession(created, password);
  }

  private async signUpExisting(
    existing: UserRow,
    email: string,
    data: Record<string, unknown>,
    now: Date,
    redirectTo?: string,
    pkce?: Pkce,
  ): Promise<User> {
    if (this.settings.autoconfirm) throw authErrors.userAlreadyExists();
    const confirmation = this.settings.confirmation;
    // Taken for confirmed addresses too, so a 429 does not tell them from unconfirmed ones.
    await confirmation?.before(email);
    if (existing.email_confirmed_at === null) {
      // Still unconfirmed: a new confirmation mail; the stored password is left alone.
      const user = confirmation
        ? await this.stores.transaction(async (client) => {
            await confirmation.send(client, existing, redirectTo, pkce);
            return this.stores.users.findUserById(existing.id, client);
          })
        : await this.stores.users.markConfirmationSent(existing.id, now);
      confirmation?.committed();
      if (user) return toUser(user);
    }
    // Confirmed: do not reveal it. A made-up user whose empty identities is the only tell.
    const at = goTime(now);
    return {
      id: randomUUID(),
      aud: ACCESS_TOKEN_AUDIENCE,
      role: '',
      email,
      phone: '',
      confirmation_sent_at: at,
      app_metadata: { ...EMAIL_APP_METADATA },
      user_metadata: data,
      identities: [],
      created_at: at,
      updated_at: at,
      is_anonymous: false,
    };
  }

  async signInWithPassword(input: { email?: string; phone?: string; password?: string }): Promise<TokenResponse> {
    const rawEmail = input.email ?? '';
    if (rawEmail === '' && !input.phone) throw authErrors.validation('missing email or phone');
    const password = input.password ?? '';
    // No stored address contains U+0000, and PostgreSQL refuses it even as a parameter (a 500 before).
    // Looked up as sent, lower-cased (GoTrue trims nothing): " a@b.c" is no one's address.
    const lookup = rawEmail === '' || rawEmail.includes('\u0000') ? undefined : rawEmail.toLowerCase();
    const user = lookup === undefined ? undefined : await this.stores.users.findUserByEmail(lookup);
    // Same work and same answer for an unknown address and a wrong password.
    const valid = await this.passwords.verify(password, user?.encrypted_password);
    if (!user || !valid) throw authErrors.invalidCredentials();
    if (user.banned_until !== null && user.banned_until.getTime() > this.clock()) throw authErrors.userBanned();
    if (user.email_confirmed_at === null) throw authErrors.emailNotConfirmed();
    return this.startSession(user, password);
  }

  private async startSession(user: UserRow, password: string): Promise<TokenResponse> {
    const response = await this.newSession(user.id, 'password');
    const weakness = passwordWeakness(password);
    return weakness ? { ...response, weak_password: weakness } : response;
  }

  /** A session for the user whose emailed link or code was just verified (amr `otp`, as GoTrue). */
  async startSessionAfterVerification(userId: string): Promise<TokenResponse> {
    return this.newSession(userId, 'otp');
  }

  private async newSession(userId: string, method: AuthMethod): Promise<TokenResponse> {
    const refreshToken = newRefreshToken();
    const session = await this.stores.sessions.startSession(userId, sha256(refreshToken), this.now(), method);
    const user = await this.stores.users.findUserById(userId);
    if (!user) throw authErrors.userNotFound();
    return this.tokenResponse(user, session, refreshToken);
  }

  // ---- refresh ------------------------------------------------------------------------------

  /**
   * The successor of a refresh token is an HMAC of it, so only its SHA-256 needs storing and yet
   * the holder of the immediately previous token can be handed the current one again (a client
   * that lost the response of its last refresh). Only within the reuse interval: without a limit,
   * a thief who stays one rotation behind would share the session forever, never detected.
   */
  private successorOf(refreshToken: string): string {
    return createHmac('sha256', this.settings.refreshTokenKey).update(refreshToken).digest('base64url');
  }

  async refresh(refreshToken: string | undefined): Promise<TokenResponse> {
    if (!refreshToken) throw new OAuthError('invalid_request', 'refresh_token required');
    // Before any rotation, as GoTrue checks it: a banned user's token stays as it was.
    const bannedUntil = await this.stores.sessions.bannedUntilOfRefreshTokenOwner(sha256(refreshToken));
    if (bannedUntil && bannedUntil.getTime() > this.clock()) throw new AuthError(400, 'user_banned', 'Invalid Refresh Token: User Banned');
    const successor = this.successorOf(refreshToken);
    const outcome = await this.stores.sessions.refresh(
      sha256(refreshToken),
      sha256(successor),
      this.now(),
      this.settings.refreshTokenReuseIntervalSeconds * 1000,
    );
    if (outcome.kind === 'not_found') throw authErrors.refreshTokenNotFound();
    if (outcome.kind === 'reused') {
      this.log.info({ session_id: outcome.session.id }, 'refresh token reused: session revoked');
      throw authErrors.refreshTokenAlreadyUsed();
    }
    const user = await this.stores.users.findUserById(outcome.session.user_id);
    if (!user) throw authErrors.refreshTokenNotFound();
    return this.tokenResponse(user, outcome.session, successor);
  }

  /**
   * The tokens of a session: its access token carries the session's aal and amr (GoTrue reads both
   * from the session's claims, so a refresh keeps what the session was raised to).
   */
  async tokenResponse(user: UserRow, session: SessionRow, refreshToken: string): Promise<TokenResponse> {
    const iat = this.keys.nowSeconds();
    const exp = iat + this.settings.jwtExpirySeconds;
    const accessToken = await this.keys.sign({
      iss: this.settings.issuer,
      sub: user.id,
      aud: user.aud || ACCESS_TOKEN_AUDIENCE,
      exp,
      iat,
      email: user.email ?? '',
      phone: user.phone ?? '',
      app_metadata: user.raw_app_meta_data,
      user_metadata: user.raw_user_meta_data,
      role: user.role || 'authenticated',
      aal: session.aal,
      amr: session.amr,
      session_id: session.id,
      is_anonymous: user.is_anonymous,
    });
    return {
      access_token: accessToken,
      token_type: 'bearer',
      expires_in: this.settings.jwtExpirySeconds,
      expires_at: exp,
      refresh_token: refreshToken,
      user: toUser(user),
    };
  }

  // ---- the caller's own account -------------------------------------------------------------

  /** Verified claims of the caller's bearer JWT, or GoTrue's error for it. */
  private async bearerClaims(caller: Caller): Promise<VerifiedClaims> {
    if (caller.bearer.kind === 'other') throw authErrors.noAuthorization();
    // An opaque key stands for a JWT with only a role, which GoTrue would parse fine and then
    // find without a subject.
    if (caller.bearer.kind === 'key') return { role: caller.keyRole, exp: Number.MAX_SAFE_INTEGER };
    const result = await this.keys.verify(caller.bearer.token);
    if (!result.ok) throw authErrors.badJwt(`invalid JWT: unable to parse or verify signature, ${jwtReason(result.problem)}`);
    return result.claims;
  }

  /** GoTrue's requireAuthentication + user/session loading, in its order. */
  async authenticate(caller: Caller): Promise<{ user: UserRow; session: SessionRow; claims: VerifiedClaims }> {
    const claims = await this.bearerClaims(caller);
    const sub = claims.sub;
    if (typeof sub !== 'string' || sub === '') throw authErrors.badJwt('invalid claim: missing sub claim');
    if (!UUID.test(sub)) throw authErrors.badJwt('invalid claim: sub claim must be a UUID', 400);
    const sessionId = claims.session_id;
    const validSessionId = typeof sessionId === 'string' && UUID.test(sessionId);
    // One query for both; the errors keep GoTrue's order (user, then the claim, then the session).
    const found = await this.stores.sessions.findUserWithSession(sub, validSessionId ? sessionId : undefined);
    if (!found) throw authErrors.userFromSubNotFound();
    if (!validSessionId) throw authErrors.badJwt('invalid claim: session_id claim must be a UUID');
    const { user, session } = found;
    if (!session || session.user_id !== user.id) throw authErrors.sessionNotFound();
    if (user.banned_until !== null && user.banned_until.getTime() > this.clock()) throw authErrors.userBanned(403);
    return { user, session, claims };
  }

  async getUser(caller: Caller): Promise<User> {
    const { user, claims } = await this.authenticate(caller);
    if (claims.aud !== ACCESS_TOKEN_AUDIENCE) throw authErrors.validation("Token audience doesn't match request audience");
    return toUser(user);
  }

  async logout(caller: Caller, scope: LogoutScope): Promise<void> {
    const { user, session } = await this.authenticate(caller);
    await this.stores.sessions.deleteSessions(scope, session.id, user.id);
  }

  // ---- admin ----------------------------------------------------------------------------------

  async requireAdmin(caller: Caller): Promise<void> {
    const claims = await this.bearerClaims(caller);
    if (typeof claims.role !== 'string' || !ADMIN_ROLES.has(claims.role)) throw authErrors.notAdmin();
  }

  async adminCreateUser(
    caller: Caller,
    attrs: {
      email?: string;
      phone?: string;
      password?: string;
      email_confirm?: boolean;
      user_metadata?: Record<string, unknown>;
      app_metadata?: Record<string, unknown>;
    },
  ): Promise<User> {
    await this.requireAdmin(caller);
    if (!attrs.email) {
      if (attrs.phone) throw authErrors.validation('Phone users are not supported by this identity provider');
      throw authErrors.validation('Cannot create a user without either an email or phone');
    }
    const email = parseEmail(attrs.email);
    checkStorableMetadata('user_metadata', attrs.user_metadata);
    checkStorableMetadata('app_metadata', attrs.app_metadata);
    checkMetadataLimits('user_metadata', attrs.user_metadata);
    checkMetadataLimits('app_metadata', attrs.app_metadata);
    // No strength check here (GoTrue's admin API does none), only bcrypt's limit.
    const password = attrs.password ?? randomPassword();
    checkPasswordTooLong(password);
    const now = this.now();
    const confirmed = attrs.email_confirm === true;
    const created = await this.stores.users.createUser({
      email,
      passwordHash: await this.passwords.hash(password),
      emailConfirmedAt: confirmed ? now : null,
      confirmationSentAt: null,
      userMetadata: confirmed ? { ...attrs.user_metadata, email_verified: true } : { ...attrs.user_metadata },
      appMetadata: { ...attrs.app_metadata, ...EMAIL_APP_METADATA },
      now,
    });
    if (!created) throw authErrors.emailExists();
    return toUser(created);
  }

  async adminDeleteUser(caller: Caller, id: string, softDelete: boolean): Promise<void> {
    await this.requireAdmin(caller);
    if (!UUID.test(id)) throw new AuthError(404, 'validation_failed', 'user_id must be an UUID');
    const deleted = await (softDelete ? this.stores.users.softDeleteUser(id, this.now()) : this.stores.users.deleteUser(id)).catch(
      (err: { code?: string }) => {
        // An app table referencing auth.users without ON DELETE CASCADE / SET NULL blocks the delete.
        if (err.code === '23503') throw authErrors.unexpected('Database error deleting user');
        throw err;
      },
    );
    if (!deleted) throw authErrors.userNotFound();
  }
}
