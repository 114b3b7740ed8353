import { randomUUID } from 'node:crypto';
import { type Pool, type PoolClient, isUniqueViolation, withTransaction } from '../../../kit/db.js';
import type { UserRow } from '../user.js';

// The SQL of GoTrue's users (its models/user.go): the user row, its email identity, email
// confirmation and change, administration. Runs on the admin pool: the idp owns the auth schema,
// which the API roles cannot touch. Timestamps come from the injected clock, so expiry tests can move it.

type Db = Pool | PoolClient;

export const USER_SELECT = `
  SELECT u.id, u.aud, u.role, u.email, u.phone, u.encrypted_password, u.email_confirmed_at,
         u.phone_confirmed_at, u.confirmed_at, u.confirmation_sent_at, u.recovery_sent_at, u.invited_at,
         u.email_change, u.email_change_sent_at, u.email_change_confirm_status, u.last_sign_in_at,
         u.raw_app_meta_data, u.raw_user_meta_data, u.banned_until, u.deleted_at, u.is_anonymous,
         u.created_at, u.updated_at,
         coalesce((
           SELECT json_agg(json_build_object(
                    'identity_id', i.id, 'id', i.provider_id, 'user_id', i.user_id,
                    'identity_data', i.identity_data, 'provider', i.provider,
                    'last_sign_in_at', i.last_sign_in_at, 'created_at', i.created_at,
                    'updated_at', i.updated_at, 'email', i.email) ORDER BY i.created_at)
           FROM auth.identities i WHERE i.user_id = u.id), '[]'::json) AS identities,
         coalesce((
           SELECT json_agg(json_build_object(
                    'id', f.id, 'friendly_name', f.friendly_name, 'factor_type', f.factor_type, 'status', f.status,
                    'created_at', f.created_at, 'updated_at', f.updated_at,
                    'last_challenged_at', f.last_challenged_at) ORDER BY f.created_at, f.id)
           FROM auth.mfa_factors f WHERE f.user_id = u.id), '[]'::json) AS factors
  FROM auth.users u`;

export interface NewUser {
  email: string;
  passwordHash: string;
  emailConfirmedAt: Date | null;
  confirmationSentAt: Date | null;
  userMetadata: Record<string, unknown>;
  appMetadata: Record<string, unknown>;
  now: Date;
  /** Set for a user made by an invitation. */
  invitedAt?: Date;
  /**
   * Sign-up `data`: GoTrue adds each key to the email identity's identity_data, unless the key is
   * one of its own (sub, email, email_verified, phone_verified).
   */
  identityData?: Record<string, unknown>;
}

/** What updateUser writes; an absent field is left as it is. */
export interface UserChanges {
  email?: string;
  passwordHash?: string;
  /** Sets email_confirmed_at when it is not set yet; with a new address, an anonymous user becomes permanent. */
  confirmEmail?: boolean;
  /** null lifts a ban. */
  bannedUntil?: Date | null;
  appMetadata?: Record<string, unknown>;
  userMetadata?: Record<string, unknown>;
  /** The session that stays when the password changes (the caller's own). */
  keepSession?: string;
  /**
   * An anonymous user's own new address, taken at once (IDP_AUTOCONFIRM), as confirming an email
   * change does: the user becomes permanent.
   */
  confirmedEmail?: string;
  now: Date;
}

/** Rolls back an update whose new address someone took meanwhile. */
class EmailTaken extends Error {}

export class UserStore {
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

  /**
   * The new user with its email identity, or undefined when the address is taken. `within` runs in
   * the same transaction (a confirmation token and its mail), so both exist or neither.
   */
  async createUser(user: NewUser, within?: (client: PoolClient, created: UserRow) => Promise<void>): Promise<UserRow | undefined> {
    const id = randomUUID();
    // GoTrue writes its provider claims here with email_verified and phone_verified always false
    // (the struct tags keep zero values), and confirming an address never updates them: the
    // confirmation shows in email_confirmed_at and in user_metadata.email_verified instead.
    const identityData: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(user.identityData ?? {})) {
      Object.defineProperty(identityData, key, { value, enumerable: true, writable: true, configurable: true });
    }
    Object.assign(identityData, { sub: id, email: user.email, email_verified: false, phone_verified: false });
    try {
      return await withTransaction(this.pool, async (client) => {
        await client.query(
          `INSERT INTO auth.users (id, aud, role, email, encrypted_password, email_confirmed_at, confirmation_sent_at,
                                   raw_app_meta_data, raw_user_meta_data, created_at, updated_at, invited_at)
           VALUES ($1, 'authenticated', 'authenticated', $2, $3, $4, $5, $6, $7, $8, $8, $9)`,
          [
            id,
            user.email,
            user.passwordHash,
            user.emailConfirmedAt,
            user.confirmationSentAt,
            user.appMetadata,
            user.userMetadata,
            user.now,
            user.invitedAt ?? null,
          ],
        );
        await client.query(
          `INSERT INTO auth.identities (provider_id, user_id, identity_data, provider, created_at, updated_at)
           VALUES ($1::text, $2::uuid, $3, 'email', $4, $4)`,
          [id, id, identityData, user.now],
        );
        const created = (await this.findUserById(id, client))!;
        if (within) await within(client, created);
        return this.findUserById(id, client);
      });
    } catch (err) {
      if (isUniqueViolation(err, 'users_email_partial_key')) return undefined;
      throw err;
    }
  }

  /**
   * An anonymous user (GoTrue's SignupAnonymously): no email, password or identity, and app_metadata
   * without a provider, as GoTrue leaves it.
   */
  async createAnonymousUser(userMetadata: Record<string, unknown>, now: Date): Promise<UserRow> {
    const { rows } = await this.pool.query<{ id: string }>(
      `INSERT INTO auth.users (aud, role, is_anonymous, raw_app_meta_data, raw_user_meta_data, created_at, updated_at)
       VALUES ('authenticated', 'authenticated', true, '{}', $1, $2, $2) RETURNING id`,
      [userMetadata, now],
    );
    return (await this.findUserById(rows[0]!.id))!;
  }

  /**
   * The user's email identity for `email`, made when it has none (an anonymous user given an
   * address), with GoTrue's claims: email_verified as `verified`.
   */
  private async addEmailIdentityIfMissing(client: PoolClient, userId: string, email: string, verified: boolean, now: Date): Promise<void> {
    const identityData = { sub: userId, email, email_verified: verified, phone_verified: false };
    await client.query(
      `INSERT INTO auth.identities (provider_id, user_id, identity_data, provider, created_at, updated_at)
       SELECT $1::text, $1::uuid, $2, 'email', $3, $3
       WHERE NOT EXISTS (SELECT 1 FROM auth.identities WHERE user_id = $1::uuid AND provider = 'email')`,
      [userId, identityData, now],
    );
  }

  /** The user's address is confirmed (a no-op when it already was), as GoTrue's user.Confirm. */
  async confirmEmail(client: PoolClient, userId: string, now: Date): Promise<void> {
    await client.query(
      `UPDATE auth.users SET email_confirmed_at = coalesce(email_confirmed_at, $2),
              raw_user_meta_data = raw_user_meta_data || '{"email_verified": true}'::jsonb, updated_at = $2
       WHERE id = $1`,
      [userId, now],
    );
  }

  /** A new address awaiting confirmation; both confirmations are to come. */
  async startEmailChange(client: PoolClient, userId: string, newEmail: string, now: Date): Promise<void> {
    await client.query(
      `UPDATE auth.users SET email_change = $2, email_change_confirm_status = 0, email_change_sent_at = $3, updated_at = $3 WHERE id = $1`,
      [userId, newEmail, now],
    );
    await client.query(`DELETE FROM auth.one_time_tokens WHERE user_id = $1 AND token_type LIKE 'email_change_token_%'`, [userId]);
  }

  /** One of the two addresses confirmed the change; the other is still to confirm. */
  async confirmEmailChangeOnce(client: PoolClient, userId: string, now: Date): Promise<void> {
    await client.query('UPDATE auth.users SET email_change_confirm_status = 1, updated_at = $2 WHERE id = $1', [userId, now]);
  }

  /**
   * The pending address becomes the user's (and its email identity's); false when someone took it
   * meanwhile. The other email change token goes too.
   */
  async completeEmailChange(client: PoolClient, userId: string, now: Date): Promise<boolean> {
    await client.query('SAVEPOINT email_change');
    try {
      // A first confirmation also marks user_metadata, as GoTrue's user.Confirm does.
      const { rows } = await client.query<{ email: string; was_anonymous: boolean }>(
        `UPDATE auth.users u SET email = u.email_change, email_change = NULL, email_change_sent_at = NULL, email_change_confirm_status = 0,
                email_confirmed_at = coalesce(u.email_confirmed_at, $2),
                raw_user_meta_data = CASE WHEN u.email_confirmed_at IS NULL
                  THEN u.raw_user_meta_data || '{"email_verified": true}'::jsonb ELSE u.raw_user_meta_data END,
                is_anonymous = false, updated_at = $2
         FROM auth.users previous WHERE previous.id = u.id AND u.id = $1 AND u.email_change IS NOT NULL
         RETURNING u.email, previous.is_anonymous AS was_anonymous`,
        [userId, now],
      );
      if (rows[0]?.was_anonymous) await this.becamePermanent(client, userId, rows[0].email, now);
    } catch (err) {
      await client.query('ROLLBACK TO SAVEPOINT email_change');
      if (isUniqueViolation(err, 'users_email_partial_key')) return false;
      throw err;
    }
    await client.query(
      `UPDATE auth.identities SET identity_data = identity_data || jsonb_build_object('email', u.email), updated_at = $2
       FROM auth.users u WHERE u.id = $1 AND auth.identities.user_id = $1 AND auth.identities.provider = 'email'`,
      [userId, now],
    );
    await client.query(`DELETE FROM auth.one_time_tokens WHERE user_id = $1 AND token_type LIKE 'email_change_token_%'`, [userId]);
    return true;
  }

  /**
   * An anonymous user's confirmed address makes it permanent (GoTrue's emailChangeVerify): its email
   * identity (email_verified true) and app_metadata naming the email provider, as GoTrue derives
   * them from the identities after a verification.
   */
  private async becamePermanent(client: PoolClient, userId: string, email: string, now: Date): Promise<void> {
    await this.addEmailIdentityIfMissing(client, userId, email, true, now);
    await client.query(
      `UPDATE auth.users SET raw_app_meta_data = raw_app_meta_data || '{"provider": "email", "providers": ["email"]}'::jsonb WHERE id = $1`,
      [userId],
    );
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

  /** One page of live users, newest first (GoTrue's default order), and how many there are. */
  async listUsers(limit: number, offset: number): Promise<{ users: UserRow[]; total: number }> {
    const [page, count] = await Promise.all([
      this.pool.query<UserRow>(`${USER_SELECT} WHERE u.deleted_at IS NULL ORDER BY u.created_at DESC, u.id LIMIT $1 OFFSET $2`, [
        limit,
        offset,
      ]),
      this.pool.query<{ total: string }>('SELECT count(*) AS total FROM auth.users WHERE deleted_at IS NULL'),
    ]);
    return { users: page.rows, total: Number(count.rows[0]!.total) };
  }

  /**
   * Changes a live user under a lock on its row: `decide` sees the current row and returns the
   * changes (or throws to change nothing), so a merge of metadata and its size check see the same
   * row even when updates race. Undefined when there is no such user; `emailTaken` when the new
   * address belongs to someone else.
   */
  async updateUser(id: string, decide: (current: UserRow) => UserChanges): Promise<UserRow | undefined | 'emailTaken'> {
    try {
      return await withTransaction(this.pool, async (client) => {
        const locked = await client.query('SELECT id FROM auth.users WHERE id = $1 AND deleted_at IS NULL FOR UPDATE', [id]);
        if (locked.rowCount === 0) return undefined;
        const current = (await this.findUserById(id, client))!;
        const c = decide(current);
        await client.query(
          `UPDATE auth.users SET
             email = coalesce($2, email),
             encrypted_password = coalesce($3, encrypted_password),
             email_confirmed_at = CASE WHEN $4::boolean THEN coalesce(email_confirmed_at, $9) ELSE email_confirmed_at END,
             banned_until = CASE WHEN $5::boolean THEN $6::timestamptz ELSE banned_until END,
             raw_app_meta_data = coalesce($7, raw_app_meta_data),
             raw_user_meta_data = coalesce($8, raw_user_meta_data),
             updated_at = $9
           WHERE id = $1`,
          [
            id,
            c.email ?? null,
            c.passwordHash ?? null,
            c.confirmEmail === true,
            c.bannedUntil !== undefined,
            c.bannedUntil ?? null,
            c.appMetadata ?? null,
            c.userMetadata ?? null,
            c.now,
          ],
        );
        if (c.email !== undefined) {
          await client.query(
            `UPDATE auth.identities SET identity_data = identity_data || jsonb_build_object('email', $2::text), updated_at = $3
             WHERE user_id = $1 AND provider = 'email'`,
            [id, c.email, c.now],
          );
          // GoTrue's admin update: an anonymous user given an address gets its email identity, and is
          // permanent once the address is confirmed.
          await this.addEmailIdentityIfMissing(client, id, c.email, c.confirmEmail === true, c.now);
          if (c.confirmEmail === true) await client.query('UPDATE auth.users SET is_anonymous = false WHERE id = $1', [id]);
        }
        if (c.confirmedEmail !== undefined) {
          await client.query('UPDATE auth.users SET email_change = $2 WHERE id = $1', [id, c.confirmedEmail]);
          if (!(await this.completeEmailChange(client, id, c.now))) throw new EmailTaken();
        }
        // A new password ends the other sessions (all of them when no session is kept), as in GoTrue.
        if (c.passwordHash !== undefined) {
          await client.query('DELETE FROM auth.sessions WHERE user_id = $1 AND id IS DISTINCT FROM $2', [id, c.keepSession ?? null]);
        }
        return this.findUserById(id, client);
      });
    } catch (err) {
      if (err instanceof EmailTaken || isUniqueViolation(err, 'users_email_partial_key')) return 'emailTaken';
      throw err;
    }
  }
}
