import { randomUUID } from 'node:crypto';
import { type Pool, type PoolClient, isUniqueViolation, withTransaction } from '../../kit/db.js';
import type { UserRow } from './user.js';

// The only SQL of the auth endpoints. Runs on the admin pool: the idp owns the auth schema, which
// the API roles cannot touch. Timestamps come from the injected clock, so expiry tests can move it.

type Db = Pool | PoolClient;

const USER_SELECT = `
  SELECT u.id, u.aud, u.role, u.email, u.phone, u.encrypted_password, u.email_confirmed_at,
         u.phone_confirmed_at, u.confirmed_at, u.confirmation_sent_at, u.last_sign_in_at,
         u.raw_app_meta_data, u.raw_user_meta_data, u.banned_until, u.deleted_at, u.is_anonymous,
         u.created_at, u.updated_at,
         coalesce((
           SELECT json_agg(json_build_object(
                    'identity_id', i.id, 'id', i.provider_id, 'user_id', i.user_id,
                    'identity_data', i.identity_data, 'provider', i.provider,
                    'last_sign_in_at', i.last_sign_in_at, 'created_at', i.created_at,
                    'updated_at', i.updated_at, 'email', i.email) ORDER BY i.created_at)
           FROM auth.identities i WHERE i.user_id = u.id), '[]'::json) AS identities
  FROM auth.users u`;

export interface NewUser {
  email: string;
  passwordHash: string;
  emailConfirmedAt: Date | null;
  confirmationSentAt: Date | null;
  userMetadata: Record<string, unknown>;
  appMetadata: Record<string, unknown>;
  now: Date;
}

export interface SessionRow {
  id: string;
  user_id: string;
  created_at: Date;
}

/** What happened to a presented refresh token, decided under a lock on its session. */
export type RefreshOutcome =
  | { kind: 'not_found' }
  | { kind: 'rotated'; session: SessionRow }
  | { kind: 'current_returned'; session: SessionRow }
  | { kind: 'reused'; session: SessionRow };

export class AuthRepository {
  constructor(private readonly pool: Pool) {}

  async findUserById(id: string, db: Db = this.pool): Promise<UserRow | undefined> {
    const { rows } = await db.query<UserRow>(`${USER_SELECT} WHERE u.id = $1 AND u.deleted_at IS NULL`, [id]);
    return rows[0];
  }

  async findUserByEmail(email: string): Promise<UserRow | undefined> {
    const { rows } = await this.pool.query<UserRow>(
      `${USER_SELECT} WHERE lower(u.email) = $1 AND u.is_sso_user = false AND u.deleted_at IS NULL`,
      [email],
    );
    return rows[0];
  }

  /** The new user with its email identity, or undefined when the address is taken. */
  async createUser(user: NewUser): Promise<UserRow | undefined> {
    const id = randomUUID();
    const identityData = {
      sub: id,
      email: user.email,
      email_verified: user.emailConfirmedAt !== null,
      phone_verified: false,
    };
    try {
      return await withTransaction(this.pool, async (client) => {
        await client.query(
          `INSERT INTO auth.users (id, aud, role, email, encrypted_password, email_confirmed_at, confirmation_sent_at,
                                   raw_app_meta_data, raw_user_meta_data, created_at, updated_at)
           VALUES ($1, 'authenticated', 'authenticated', $2, $3, $4, $5, $6, $7, $8, $8)`,
          [id, user.email, user.passwordHash, user.emailConfirmedAt, user.confirmationSentAt, user.appMetadata, user.userMetadata, user.now],
        );
        await client.query(
          `INSERT INTO auth.identities (provider_id, user_id, identity_data, provider, created_at, updated_at)
           VALUES ($1::text, $2::uuid, $3, 'email', $4, $4)`,
          [id, id, identityData, user.now],
        );
        return this.findUserById(id, client);
      });
    } catch (err) {
      if (isUniqueViolation(err, 'users_email_partial_key')) return undefined;
      throw err;
    }
  }

  async markConfirmationSent(userId: string, now: Date): Promise<UserRow | undefined> {
    await this.pool.query('UPDATE auth.users SET confirmation_sent_at = $2, updated_at = $2 WHERE id = $1', [userId, now]);
    return this.findUserById(userId);
  }

  /** A new session with its first refresh token; records the sign-in. */
  async startSession(userId: string, refreshTokenHash: string, now: Date): Promise<SessionRow> {
    const { rows } = await this.pool.query<SessionRow>(
      `WITH s AS (
         INSERT INTO auth.sessions (user_id, created_at, updated_at) VALUES ($1, $3, $3)
         RETURNING id, user_id, created_at),
       t AS (
         INSERT INTO auth.refresh_tokens (token, user_id, session_id, created_at, updated_at)
         SELECT $2, $1, s.id, $3, $3 FROM s),
       u AS (
         UPDATE auth.users SET last_sign_in_at = $3, updated_at = $3 WHERE id = $1),
       i AS (
         UPDATE auth.identities SET last_sign_in_at = $3 WHERE user_id = $1 AND provider = 'email')
       SELECT id, user_id, created_at FROM s`,
      [userId, refreshTokenHash, now],
    );
    return rows[0]!;
  }

  async findSession(id: string): Promise<SessionRow | undefined> {
    const { rows } = await this.pool.query<SessionRow>('SELECT id, user_id, created_at FROM auth.sessions WHERE id = $1', [id]);
    return rows[0];
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
        `SELECT s.id, s.user_id, s.created_at FROM auth.sessions s
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

  /** Hard delete: sessions, tokens, identities and rows of app tables follow by their ON DELETE rules. */
  async deleteUser(id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM auth.users WHERE id = $1', [id]);
    return (rowCount ?? 0) > 0;
  }

  /**
   * Soft delete, as GoTrue does it: the row stays (app rows referencing it too), the address is
   * freed, the password cleared, identities and sessions removed.
   */
  async softDeleteUser(id: string, now: Date): Promise<boolean> {
    return withTransaction(this.pool, async (client) => {
      const { rowCount } = await client.query(
        `UPDATE auth.users
         SET deleted_at = $2, updated_at = $2, encrypted_password = NULL,
             email = CASE WHEN email IS NULL THEN NULL ELSE 'deleted-' || id::text || '@deleted.invalid' END,
             phone = NULL, raw_user_meta_data = '{}'
         WHERE id = $1 AND deleted_at IS NULL`,
        [id, now],
      );
      if ((rowCount ?? 0) === 0) return false;
      await client.query('DELETE FROM auth.identities WHERE user_id = $1', [id]);
      await client.query('DELETE FROM auth.sessions WHERE user_id = $1', [id]);
      return true;
    });
  }
}
