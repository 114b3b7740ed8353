import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { Clock } from '../kit/clock.js';
import { type Pool, type PoolClient, withTransaction } from '../kit/db.js';
import { HttpError, forbidden, notFound, unauthorized } from '../kit/http/errors.js';
import type { AuditLog, Origin } from './audit.js';
import type { Account, PublicUser, UsersRepository } from './repository.js';
import { deviceName } from './devices.js';
import { type AccessTokens, type Authentication, PASSWORD_ONLY } from './tokens.js';

export const INVALID_REFRESH_TOKEN = 'Invalid or expired refresh token.';
export const ACCOUNT_BANNED = 'This account has been banned.';
export const SESSION_NOT_FOUND = 'Session not found';

/** What login, refresh and a password change answer with. */
export interface TokenPair {
  token: string;
  refresh_token: string;
  /** Seconds the access token lives. */
  expires_in: number;
  user: PublicUser;
}

export interface SessionView {
  id: string;
  created_at: string;
  last_used_at: string;
  ip: string;
  user_agent: string | null;
  /** The browser and system in words ("Chrome on Linux"), when the agent names a browser. */
  device: string | null;
}

export interface SessionLimits {
  /** A session unused this long has ended (SESSION_IDLE_TIMEOUT). */
  idleMs: number;
  /** A session this old has ended, however used (SESSION_MAX_LIFETIME). */
  maxLifetimeMs: number;
  /** How long a just-replaced refresh token still gets the session's current pair (REFRESH_REUSE_INTERVAL). */
  reuseIntervalMs: number;
}

// 32 random bytes, base64url without padding: 43 characters.
const REFRESH_TOKEN_BYTES = 32;
const REFRESH_TOKEN_FORMAT = /^[A-Za-z0-9_-]{43}$/;

/**
 * What the database keeps of a bearer secret (a refresh token, a sign-in challenge, a mailed
 * token): its SHA-256, so that reading the table gives nobody a secret that works.
 */
export const secretDigest = (secret: string): Buffer => createHash('sha256').update(secret).digest();

/**
 * Refresh tokens. A session's first token is 256 random bits; each rotation's
 * token is the HMAC of the one it replaces, under a key derived from
 * JWT_SECRET. The database holds only SHA-256 hashes, yet a tab presenting the
 * just-replaced token can be given the session's current one (the HMAC of what
 * it presents), so tabs refreshing at once all end up with one pair. Without
 * the key, a token reveals nothing of its successor; the hashes in the database
 * reveal no token at all.
 */
export class RefreshTokens {
  private readonly chainKey: Buffer;

  constructor(secret: string) {
    this.chainKey = createHmac('sha256', secret).update('accounts refresh-token chain').digest();
  }

  first(): string {
    return randomBytes(REFRESH_TOKEN_BYTES).toString('base64url');
  }

  next(token: string): string {
    return createHmac('sha256', this.chainKey).update(token).digest('base64url');
  }

  /** A string that could be one of ours; anything else is refused before the database. */
  static wellFormed(token: string): boolean {
    return REFRESH_TOKEN_FORMAT.test(token);
  }
}

interface SessionRow {
  id: string;
  user_id: string;
  is_current: boolean;
  refresh_token_hash: Buffer;
  rotated_at: Date | null;
  created_at: Date;
  last_used_at: Date;
  ended_at: Date | null;
  authenticated_at: Date | null;
  amr: string[] | null;
}

/** How a session was authenticated; sessions older than the column count from their creation, by password. */
function authenticationOf(session: SessionRow): Authentication {
  return { authTime: Math.floor((session.authenticated_at ?? session.created_at).getTime() / 1000), amr: session.amr ?? PASSWORD_ONLY };
}

/** What is told of each new session, in the transaction that starts it. */
export interface SignInWatch {
  signedIn(db: PoolClient, account: Account, origin: Origin): Promise<void>;
}

/**
 * Sessions: one per login, each with a rotating refresh token. Every change of
 * a session and its audit row are written in one transaction.
 */
export class Sessions {
  constructor(
    private readonly pool: Pool,
    private readonly users: UsersRepository,
    private readonly audit: AuditLog,
    private readonly tokens: AccessTokens,
    private readonly refreshTokens: RefreshTokens,
    private readonly limits: SessionLimits,
    private readonly clock: Clock,
    /** Told of every new session, in its transaction (the new-device mail). */
    private readonly signIns?: SignInWatch,
  ) {}

  /**
   * A new session for an account whose row the caller's transaction has locked,
   * authenticated now with the methods `amr` (a password alone unless told).
   */
  async start(db: PoolClient, account: Account, origin: Origin, amr: string[] = PASSWORD_ONLY): Promise<TokenPair> {
    const now = this.clock();
    const refreshToken = this.refreshTokens.first();
    await db.query(
      `INSERT INTO sessions (user_id, refresh_token_hash, created_at, last_used_at, ip, user_agent, authenticated_at, amr)
       VALUES ($1, $2, $3, $3, $4, $5, $3, $6)`,
      [account.user.id, secretDigest(refreshToken), new Date(now), origin.ip, origin.userAgent ?? null, amr],
    );
    await this.signIns?.signedIn(db, account, origin);
    // A login within the second of a cut-off gets iat = the cut-off (up to 1 s ahead); its auth_time
    // is that too, so a password login's token still has only the contract's claims.
    const authTime = Math.max(Math.floor(now / 1000), account.accessTokensFrom);
    return this.pair(account, refreshToken, now, { authTime, amr });
  }

  /**
   * Rotation: the current token is replaced, once. Concurrent refreshes of one
   * token queue on the session's row lock; the first rotates, the others then
   * find their token as the previous one, within the reuse interval, and get the
   * same pair. Past that interval the previous token is a replay: the session ends.
   */
  async refresh(refreshToken: string, origin: Origin): Promise<TokenPair> {
    if (!RefreshTokens.wellFormed(refreshToken)) throw unauthorized(INVALID_REFRESH_TOKEN);
    const hash = secretDigest(refreshToken);
    const outcome = await withTransaction(this.pool, async (db): Promise<TokenPair | HttpError> => {
      const { rows } = await db.query<SessionRow>(
        `SELECT id, user_id, refresh_token_hash = $1 AS is_current, refresh_token_hash, rotated_at, created_at, last_used_at, ended_at,
                authenticated_at, amr
         FROM sessions WHERE refresh_token_hash = $1 OR previous_token_hash = $1 FOR UPDATE`,
        [hash],
      );
      const session = rows[0];
      const now = this.clock();
      if (!session || session.ended_at || this.expired(session, now)) return unauthorized(INVALID_REFRESH_TOKEN);
      // Read after the session's lock: a cut-off or ban committed meanwhile is seen here.
      const account = await this.users.findAccountById(session.user_id, db);
      if (!account) return unauthorized(INVALID_REFRESH_TOKEN);
      if (account.banned) return forbidden(ACCOUNT_BANNED);
      if (session.is_current) {
        const next = this.refreshTokens.next(refreshToken);
        await db.query(
          `UPDATE sessions SET previous_token_hash = refresh_token_hash, refresh_token_hash = $2, rotated_at = $3, last_used_at = $3 WHERE id = $1`,
          [session.id, secretDigest(next), new Date(now)],
        );
        // As of the rotation time, which tabs presenting the replaced token get too.
        return this.pair(account, next, now, authenticationOf(session));
      }
      const rotatedAt = session.rotated_at!.getTime();
      const current = this.refreshTokens.next(refreshToken);
      if (now - rotatedAt <= this.limits.reuseIntervalMs && secretDigest(current).equals(session.refresh_token_hash)) {
        await db.query('UPDATE sessions SET last_used_at = $2 WHERE id = $1', [session.id, new Date(now)]);
        // Issued as of the rotation, so every tab gets the very same access token too.
        return this.pair(account, current, rotatedAt, authenticationOf(session));
      }
      await this.endSessions(db, { sessionId: session.id }, 'refresh_token_reused', now);
      await this.audit.record(
        {
          event: 'refresh_token_reused',
          targetId: session.user_id,
          origin,
          details: { session_id: session.id },
        },
        db,
      );
      return unauthorized(INVALID_REFRESH_TOKEN);
    });
    if (outcome instanceof HttpError) throw outcome;
    return outcome;
  }

  /** Ends the caller's session holding this refresh token; a token of no live session of the caller changes nothing. */
  async logout(callerId: string, refreshToken: string, origin: Origin): Promise<void> {
    if (!RefreshTokens.wellFormed(refreshToken)) return;
    await withTransaction(this.pool, async (db) => {
      const { rows } = await db.query<{ id: string }>(
        `UPDATE sessions SET ended_at = $3, end_reason = 'logout'
         WHERE (refresh_token_hash = $2 OR previous_token_hash = $2) AND user_id = $1 AND ended_at IS NULL RETURNING id`,
        [callerId, secretDigest(refreshToken), new Date(this.clock())],
      );
      if (rows[0])
        await this.audit.record(
          { event: 'logged_out', actorId: callerId, targetId: callerId, origin, details: { session_id: rows[0].id } },
          db,
        );
    });
  }

  /** Ends every session of the caller and refuses every access token issued so far. */
  async logoutEverywhere(callerId: string, origin: Origin): Promise<void> {
    await withTransaction(this.pool, async (db) => {
      await this.revokeEverything(db, callerId, 'logout_global');
      await this.audit.record({ event: 'logged_out_everywhere', actorId: callerId, targetId: callerId, origin }, db);
    });
  }

  /**
   * In the caller's transaction: ends every session of the user and moves their
   * access-token cut-off. Lock order is the user row, then sessions, everywhere.
   * The user row first: a login holding it (FOR SHARE) finishes its session
   * before, and the sessions are ended after. The cut-off is read from the clock
   * only once the sessions are ended: a refresh holding one of them has committed
   * by then, so the access token it issued is older than the cut-off.
   * Returns the new cut-off (seconds).
   */
  async revokeEverything(db: PoolClient, userId: string, reason: string): Promise<number> {
    await this.users.lockAccount(db, userId, 'update');
    await this.endSessions(db, { userId }, reason, this.clock());
    return this.users.cutOffAccessTokens(db, userId, this.clock());
  }

  /** The user's live sessions, newest first. */
  async list(userId: string): Promise<SessionView[]> {
    const now = this.clock();
    const { rows } = await this.pool.query<{ id: string; created_at: Date; last_used_at: Date; ip: string; user_agent: string | null }>(
      `SELECT id, created_at, last_used_at, ip, user_agent FROM sessions
       WHERE user_id = $1 AND ended_at IS NULL AND last_used_at > $2 AND created_at > $3
       ORDER BY created_at DESC, id`,
      [userId, new Date(now - this.limits.idleMs), new Date(now - this.limits.maxLifetimeMs)],
    );
    return rows.map((row) => ({
      id: row.id,
      created_at: row.created_at.toISOString(),
      last_used_at: row.last_used_at.toISOString(),
      ip: row.ip,
      user_agent: row.user_agent,
      device: deviceName(row.user_agent),
    }));
  }

  /** The session a refresh token belongs to (its current or just-replaced token): the pages mark it as "this device". */
  async idOf(refreshToken: string): Promise<string | undefined> {
    if (!RefreshTokens.wellFormed(refreshToken)) return undefined;
    const hash = secretDigest(refreshToken);
    const { rows } = await this.pool.query<{ id: string }>(
      'SELECT id FROM sessions WHERE refresh_token_hash = $1 OR previous_token_hash = $1',
      [hash],
    );
    return rows[0]?.id;
  }

  /** Ends one of the caller's live sessions (those the list shows); another user's, an expired or an unknown one is 404. */
  async end(callerId: string, sessionId: string, origin: Origin): Promise<void> {
    const now = this.clock();
    await withTransaction(this.pool, async (db) => {
      const { rows } = await db.query<{ id: string }>(
        `UPDATE sessions SET ended_at = $3, end_reason = 'ended_by_user'
         WHERE id = $2 AND user_id = $1 AND ended_at IS NULL AND last_used_at > $4 AND created_at > $5 RETURNING id`,
        [callerId, sessionId, new Date(now), new Date(now - this.limits.idleMs), new Date(now - this.limits.maxLifetimeMs)],
      );
      if (!rows[0]) throw notFound(SESSION_NOT_FOUND);
      await this.audit.record(
        { event: 'session_ended', actorId: callerId, targetId: callerId, origin, details: { session_id: sessionId } },
        db,
      );
    });
  }

  private expired(session: SessionRow, now: number): boolean {
    return now - session.last_used_at.getTime() >= this.limits.idleMs || now - session.created_at.getTime() >= this.limits.maxLifetimeMs;
  }

  private async endSessions(db: PoolClient, which: { sessionId: string } | { userId: string }, reason: string, now: number): Promise<void> {
    const [column, value] = 'sessionId' in which ? ['id', which.sessionId] : ['user_id', which.userId];
    await db.query(`UPDATE sessions SET ended_at = $2, end_reason = $3 WHERE ${column} = $1 AND ended_at IS NULL`, [
      value,
      new Date(now),
      reason,
    ]);
  }

  private async pair(account: Account, refreshToken: string, at: number, authentication: Authentication): Promise<TokenPair> {
    const token = await this.tokens.issueAccessToken(
      { id: account.user.id, role: account.user.role },
      { notBefore: account.accessTokensFrom, at, authentication },
    );
    return { token, refresh_token: refreshToken, expires_in: this.tokens.lifetime, user: account.user };
  }
}
