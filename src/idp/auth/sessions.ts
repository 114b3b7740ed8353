import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { Clock } from '../../kit/clock.js';
import { ACCESS_TOKEN_AUDIENCE, type SigningKeys } from '../keys.js';
import { AuthError, authErrors, OAuthError } from './errors.js';
import { passwordWeakness } from './passwords.js';
import type { SessionRow, SessionStore } from './store/sessions.js';
import type { UserStore } from './store/users.js';
import { toUser, type User, type UserRow } from './user.js';

// Sessions and their tokens (GoTrue's models/sessions.go, refresh_token.go and api/token.go's
// minting): a new session with its first refresh token, the access token that carries the
// session's aal and amr, refresh-token rotation with reuse detection, and sign-out.

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

export interface SessionSettings {
  jwtExpirySeconds: number;
  issuer: string;
  /** Derives each refresh token from the one it replaces (see successorOf). */
  refreshTokenKey: Buffer;
  /** How long after a rotation the replaced token still gets the current one back (see refresh). */
  refreshTokenReuseIntervalSeconds: number;
}

export interface Logger {
  info(obj: object, msg: string): void;
}

/** The amr method of a session's tokens, as GoTrue names it. */
export type AuthMethod = 'password' | 'otp' | 'anonymous';

export type LogoutScope = 'global' | 'local' | 'others';

export const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/** A new opaque refresh token; only its SHA-256 is stored. */
export const newRefreshToken = () => randomBytes(32).toString('base64url');

export class Sessions {
  constructor(
    private readonly stores: { users: UserStore; sessions: SessionStore },
    private readonly keys: SigningKeys,
    private readonly clock: Clock,
    private readonly settings: SessionSettings,
    private readonly log: Logger,
  ) {}

  private now(): Date {
    return new Date(this.clock());
  }

  /** A session after a password (sign-in, or a sign-up confirmed at once), telling a weak password. */
  async startWithPassword(user: UserRow, password: string): Promise<TokenResponse> {
    const response = await this.start(user.id, 'password');
    const weakness = passwordWeakness(password);
    return weakness ? { ...response, weak_password: weakness } : response;
  }

  /** A session for the user whose emailed link or code was just verified (amr `otp`, as GoTrue). */
  async startAfterVerification(userId: string): Promise<TokenResponse> {
    return this.start(userId, 'otp');
  }

  async start(userId: string, method: AuthMethod): Promise<TokenResponse> {
    const refreshToken = newRefreshToken();
    const session = await this.stores.sessions.startSession(userId, sha256(refreshToken), this.now(), method);
    const user = await this.stores.users.findUserById(userId);
    if (!user) throw authErrors.userNotFound();
    return this.tokenResponse(user, session, refreshToken);
  }

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

  /** POST /logout for an authenticated caller: ends all its sessions, this one, or the others. */
  async signOut(caller: { user: UserRow; session: SessionRow }, scope: LogoutScope): Promise<void> {
    await this.stores.sessions.deleteSessions(scope, caller.session.id, caller.user.id);
  }
}
