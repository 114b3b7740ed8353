import { type Pool, withTransaction } from '../../../kit/db.js';
import type { UserRow } from '../user.js';
import { USER_SELECT } from './users.js';

// The SQL of GoTrue's sessions and their refresh tokens (models/sessions.go, models/refresh_token.go):
// starting one, finding it with its user for every bearer token, rotation with reuse detection, sign-out.

/** A session's authentication methods, newest first (GoTrue's amr claim), for a query over `auth.sessions s`. */
export const SESSION_AMR = `
  coalesce((
    SELECT json_agg(json_build_object('method', c.authentication_method,
                                      'timestamp', floor(extract(epoch FROM c.updated_at))::bigint)
                    ORDER BY c.updated_at DESC, c.authentication_method)
    FROM auth.mfa_amr_claims c WHERE c.session_id = s.id), '[]'::json)`;

/** The columns of a SessionRow, for a query over `auth.sessions s`. */
export const SESSION_COLUMNS = `s.id, s.user_id, s.created_at, s.aal, ${SESSION_AMR} AS amr`;

/** One authentication method of a session, as GoTrue's amr claim lists it. */
export interface AmrEntry {
  method: string;
  /** Unix seconds. */
  timestamp: number;
}

export type Aal = 'aal1' | 'aal2';

export interface SessionRow {
  id: string;
  user_id: string;
  created_at: Date;
  aal: Aal;
  amr: AmrEntry[];
}

/** What happened to a presented refresh token, decided under a lock on its session. */
export type RefreshOutcome =
  | { kind: 'not_found' }
  | { kind: 'rotated'; session: SessionRow }
  | { kind: 'current_returned'; session: SessionRow }
  | { kind: 'reused'; session: SessionRow };

export class SessionStore {
  constructor(private readonly pool: Pool) {}

  /** A new session (aal1, its one method `method`) with its first refresh token; records the sign-in. */
  async startSession(userId: string, refreshTokenHash: string, now: Date, method: string): Promise<SessionRow> {
    const { rows } = await this.pool.query<{ id: string; user_id: string; created_at: Date }>(
      `WITH s AS (
         INSERT INTO auth.sessions (user_id, created_at, updated_at) VALUES ($1, $3, $3)
         RETURNING id, user_id, created_at),
       t AS (
         INSERT INTO auth.refresh_tokens (token, user_id, session_id, created_at, updated_at)
         SELECT $2, $1, s.id, $3, $3 FROM s),
       c AS (
         INSERT INTO auth.mfa_amr_claims (session_id, created_at, updated_at, authentication_method)
         SELECT s.id, $3, $3, $4 FROM s),
       u AS (
         UPDATE auth.users SET last_sign_in_at = $3, updated_at = $3 WHERE id = $1),
       i AS (
         UPDATE auth.identities SET last_sign_in_at = $3 WHERE user_id = $1 AND provider = 'email')
       SELECT id, user_id, created_at FROM s`,
      [userId, refreshTokenHash, now, method],
    );
    return { ...rows[0]!, aal: 'aal1', amr: [{ method, timestamp: Math.floor(now.getTime() / 1000) }] };
  }

  /**
   * The user (not deleted) and, when `sessionId` is given, that session, in one round trip: every
   * request with a bearer token needs both. undefined when there is no such user; `session`
   * undefined when there is no such session (whoever it belongs to: the caller compares).
   */
  async findUserWithSession(
    userId: string,
    sessionId: string | undefined,
  ): Promise<{ user: UserRow; session: SessionRow | undefined } | undefined> {
    // Named: each connection parses and plans it once rather than on every request (planning
    // was most of PostgreSQL's CPU for it); sent unnamed when DATABASE_NAMED_STATEMENTS=false.
    const { rows } = await this.pool.query<
      UserRow & {
        session_id: string | null;
        session_user_id: string | null;
        session_created_at: Date | null;
        session_aal: Aal | null;
        session_amr: AmrEntry[] | null;
      }
    >({
      name: 'idp-find-user-with-session',
      text: `SELECT found.*, s.id AS session_id, s.user_id AS session_user_id, s.created_at AS session_created_at,
                    s.aal AS session_aal, CASE WHEN s.id IS NULL THEN NULL ELSE ${SESSION_AMR} END AS session_amr
               FROM (${USER_SELECT} WHERE u.id = $1 AND u.deleted_at IS NULL) found
               LEFT JOIN auth.sessions s ON s.id = $2::uuid`,
      values: [userId, sessionId ?? null],
    });
    const row = rows[0];
    if (!row) return undefined;
    const { session_id, session_user_id, session_created_at, session_aal, session_amr, ...user } = row;
    const session =
      session_id === null
        ? undefined
        : { id: session_id, user_id: session_user_id!, created_at: session_created_at!, aal: session_aal!, amr: session_amr! };
    return { user, session };
  }

  /**
   * Rotation with reuse detection, serialised per session (a row lock on it), so two refreshes
   * racing with the same token see one rotation and one "immediately previous" token.
   * `successorHash` is the hash of the token that replaces the presented one. A revoked token gets
   * the current one back only when it is the immediately previous token and was replaced at most
   * `reuseIntervalMs` ago (GoTrue's reuse interval, measured from the token's revocation as
   * GoTrue does); any other revoked token is reuse, and the whole session with all its tokens goes.
   */
  async refresh(tokenHash: string, successorHash: string, now: Date, reuseIntervalMs: number): Promise<RefreshOutcome> {
    return withTransaction(this.pool, async (client) => {
      const found = await client.query<{ session_id: string }>('SELECT session_id FROM auth.refresh_tokens WHERE token = $1', [tokenHash]);
      const sessionId = found.rows[0]?.session_id;
      if (sessionId === undefined) return { kind: 'not_found' };
      const sessions = await client.query<SessionRow>(
        `SELECT ${SESSION_COLUMNS} FROM auth.sessions s
         JOIN auth.users u ON u.id = s.user_id AND u.deleted_at IS NULL
         WHERE s.id = $1 FOR UPDATE OF s`,
        [sessionId],
      );
      const session = sessions.rows[0];
      if (session === undefined) return { kind: 'not_found' };
      const tokens = await client.query<{ token: string; revoked: boolean; updated_at: Date }>(
        'SELECT token, revoked, updated_at FROM auth.refresh_tokens WHERE token = ANY($1) AND session_id = $2',
        [[tokenHash, successorHash], sessionId],
      );
      const presented = tokens.rows.find((t) => t.token === tokenHash);
      const successor = tokens.rows.find((t) => t.token === successorHash);
      if (presented === undefined) return { kind: 'not_found' };
      if (!presented.revoked) {
        await client.query('UPDATE auth.refresh_tokens SET revoked = true, updated_at = $2 WHERE token = $1', [tokenHash, now]);
        await client.query(
          `INSERT INTO auth.refresh_tokens (token, user_id, session_id, parent, created_at, updated_at)
           VALUES ($1, $2, $3, $4, $5, $5)`,
          [successorHash, session.user_id, sessionId, tokenHash, now],
        );
        await client.query('UPDATE auth.sessions SET updated_at = $2 WHERE id = $1', [sessionId, now]);
        return { kind: 'rotated', session };
      }
      // updated_at of a revoked token is when it was replaced (nothing else updates it).
      const replacedRecently = now.getTime() - presented.updated_at.getTime() <= reuseIntervalMs;
      if (successor !== undefined && !successor.revoked && replacedRecently) return { kind: 'current_returned', session };
      // An older token, or the previous one after the interval: someone kept a copy. End the whole session.
      await client.query('DELETE FROM auth.sessions WHERE id = $1', [sessionId]);
      return { kind: 'reused', session };
    });
  }

  async deleteSessions(scope: 'global' | 'local' | 'others', sessionId: string, userId: string): Promise<void> {
    if (scope === 'global') {
      await this.pool.query('DELETE FROM auth.sessions WHERE user_id = $1', [userId]);
    } else {
      const match = scope === 'local' ? '=' : '<>';
      await this.pool.query(`DELETE FROM auth.sessions WHERE user_id = $1 AND id ${match} $2`, [userId, sessionId]);
    }
  }

  /** Until when the owner of a refresh token is banned (null: not banned), undefined for an unknown token. */
  async bannedUntilOfRefreshTokenOwner(tokenHash: string): Promise<Date | null | undefined> {
    const { rows } = await this.pool.query<{ banned_until: Date | null }>(
      'SELECT u.banned_until FROM auth.refresh_tokens t JOIN auth.users u ON u.id = t.user_id WHERE t.token = $1',
      [tokenHash],
    );
    return rows[0]?.banned_until;
  }
}
