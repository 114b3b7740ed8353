import { type Pool, type PoolClient, isUniqueViolation } from '../kit/db.js';

export type Role = 'user' | 'admin';

/** The only user shape that leaves this module (and the service). */
export interface PublicUser {
  id: string;
  name: string;
  email: string;
  role: Role;
  /** Whether the owner of the address followed a verification (or password reset) link. */
  emailVerified: boolean;
  createdAt: string;
  updatedAt: string;
}

export interface NewUser {
  name: string;
  /** Already normalized (trimmed, lowercased). */
  email: string;
  passwordHash: string;
  role: Role;
}

/**
 * A user with what decides whether their tokens still work: the access-token
 * cut-off (whole seconds; tokens with an earlier iat are refused) and the ban.
 */
export interface Account {
  user: PublicUser;
  /** Seconds since the epoch, or 0 when there is no cut-off. */
  accessTokensFrom: number;
  banned: boolean;
}

/** Thrown when the unique index on lower(email) refuses an insert. */
export class EmailTakenError extends Error {
  constructor() {
    super('email already registered');
    this.name = 'EmailTakenError';
  }
}

interface UserRow {
  id: string;
  name: string;
  email: string;
  role: Role;
  email_verified_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const PUBLIC_COLUMNS = 'id, name, email, role, email_verified_at, created_at, updated_at';
const ACCOUNT_COLUMNS = `${PUBLIC_COLUMNS}, access_tokens_from, banned_at`;

interface AccountRow extends UserRow {
  access_tokens_from: Date | null;
  banned_at: Date | null;
}

function toAccount(row: AccountRow): Account {
  return {
    user: toPublicUser(row),
    accessTokensFrom: row.access_tokens_from ? Math.floor(row.access_tokens_from.getTime() / 1000) : 0,
    banned: row.banned_at !== null,
  };
}
const EMAIL_INDEX = 'users_email_lower_key';

function toPublicUser(row: UserRow): PublicUser {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    role: row.role,
    emailVerified: row.email_verified_at !== null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** The only place with SQL. The password hash is read by findCredentialsByEmail and nothing else. */
export class UsersRepository {
  constructor(private readonly pool: Pool) {}

  async countAdmins(): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM users WHERE role = 'admin'");
    return rows[0]!.n;
  }

  async emailExists(email: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('SELECT 1 FROM users WHERE lower(email) = lower($1)', [email]);
    return (rowCount ?? 0) > 0;
  }

  /** @throws EmailTakenError when another account has the address (in any case). */
  async insertUser(user: NewUser, db: Pool | PoolClient = this.pool): Promise<PublicUser> {
    try {
      const { rows } = await db.query<UserRow>(
        `INSERT INTO users (name, email, password_hash, role) VALUES ($1, $2, $3, $4) RETURNING ${PUBLIC_COLUMNS}`,
        [user.name, user.email, user.passwordHash, user.role],
      );
      return toPublicUser(rows[0]!);
    } catch (err) {
      if (isUniqueViolation(err, EMAIL_INDEX)) throw new EmailTakenError();
      throw err;
    }
  }

  /**
   * Inserts unless the address is taken; the new user, or undefined when the
   * address was taken. ON CONFLICT makes two instances starting at once create one account.
   */
  async insertUserIfAbsent(user: NewUser, emailVerified = false): Promise<PublicUser | undefined> {
    const { rows } = await this.pool.query<UserRow>(
      `INSERT INTO users (name, email, password_hash, role, email_verified_at) VALUES ($1, $2, $3, $4, CASE WHEN $5 THEN now() END)
       ON CONFLICT ((lower(email))) DO NOTHING RETURNING ${PUBLIC_COLUMNS}`,
      [user.name, user.email, user.passwordHash, user.role, emailVerified],
    );
    return rows[0] ? toPublicUser(rows[0]) : undefined;
  }

  async findUserByEmail(email: string): Promise<PublicUser | undefined> {
    const { rows } = await this.pool.query<UserRow>(`SELECT ${PUBLIC_COLUMNS} FROM users WHERE lower(email) = lower($1)`, [email]);
    return rows[0] ? toPublicUser(rows[0]) : undefined;
  }

  /** For login only: the account and its password hash, which the service compares and drops. */
  async findCredentialsByEmail(email: string): Promise<{ user: PublicUser; passwordHash: string } | undefined> {
    const { rows } = await this.pool.query<UserRow & { password_hash: string }>({
      name: 'accounts-find-credentials-by-email',
      text: `SELECT ${PUBLIC_COLUMNS}, password_hash FROM users WHERE lower(email) = lower($1)`,
      values: [email],
    });
    const row = rows[0];
    return row ? { user: toPublicUser(row), passwordHash: row.password_hash } : undefined;
  }

  /**
   * One page in a stable order (created_at, then id) and the total, read in one statement (one snapshot).
   * With `search`, only the accounts whose email or name holds it, case-insensitively; its
   * `%`, `_` and `\` are escaped so they match themselves.
   */
  async listUsers(page: { limit: number; offset: number; search?: string }): Promise<{ total: number; users: PublicUser[] }> {
    const pattern = page.search === undefined ? null : `%${escapeLike(page.search)}%`;
    const { rows } = await this.pool.query<{ total: number } & { [K in keyof UserRow]: UserRow[K] | null }>(
      `WITH matching AS (
         SELECT ${PUBLIC_COLUMNS} FROM users
         WHERE $3::text IS NULL OR email ILIKE $3 ESCAPE '\\' OR name ILIKE $3 ESCAPE '\\'
       ), total AS (SELECT count(*) AS total FROM matching)
       SELECT total.total, page.* FROM total
       LEFT JOIN LATERAL (
         SELECT * FROM matching ORDER BY created_at, id LIMIT $1 OFFSET $2
       ) page ON true
       ORDER BY page.created_at, page.id`,
      [page.limit, page.offset, pattern],
    );
    const total = rows[0]?.total ?? 0;
    const users = rows.filter((row): row is typeof row & UserRow => row.id !== null).map(toPublicUser);
    return { total, users };
  }

  /**
   * The user behind an access token, with the cut-off and the ban: the one query
   * of every protected route. The two hot queries (this one and the login's) are
   * named: each connection parses and plans them once instead of on every call.
   */
  async findAccountById(id: string, db: Pool | PoolClient = this.pool): Promise<Account | undefined> {
    const { rows } = await db.query<AccountRow>({
      name: 'accounts-find-account-by-id',
      text: `SELECT ${ACCOUNT_COLUMNS} FROM users WHERE id = $1`,
      values: [id],
    });
    return rows[0] ? toAccount(rows[0]) : undefined;
  }

  /**
   * The account, its row locked until the transaction ends: FOR SHARE to start a
   * session (a concurrent cut-off then waits, and sees the session), FOR UPDATE to change it.
   */
  async lockAccount(db: PoolClient, id: string, mode: 'share' | 'update'): Promise<Account | undefined> {
    const { rows } = await db.query<AccountRow>(
      `SELECT ${ACCOUNT_COLUMNS} FROM users WHERE id = $1 ${mode === 'share' ? 'FOR SHARE' : 'FOR UPDATE'}`,
      [id],
    );
    return rows[0] ? toAccount(rows[0]) : undefined;
  }

  /** For a password change only: the hash of the caller's password, which the service compares and drops. */
  async findPasswordHashById(id: string): Promise<string | undefined> {
    const { rows } = await this.pool.query<{ password_hash: string }>('SELECT password_hash FROM users WHERE id = $1', [id]);
    return rows[0]?.password_hash;
  }

  /**
   * Refuses every access token of the user issued so far: the cut-off moves to
   * the next whole second (iat has whole seconds), and at least one second past
   * the previous cut-off, so tokens issued after that one are caught too.
   * Returns the new cut-off in seconds.
   */
  async cutOffAccessTokens(db: PoolClient, id: string, now: number): Promise<number> {
    const { rows } = await db.query<{ from: Date }>(
      `UPDATE users SET access_tokens_from = greatest(
         date_trunc('second', $2::timestamptz) + interval '1 second',
         access_tokens_from + interval '1 second')
       WHERE id = $1 RETURNING access_tokens_from AS from`,
      [id, new Date(now)],
    );
    // No row: the user was deleted meanwhile, and no token of theirs finds a user any more.
    return rows[0] ? Math.floor(rows[0].from.getTime() / 1000) : 0;
  }

  async setPasswordHash(db: PoolClient, id: string, passwordHash: string, now: number): Promise<void> {
    await db.query('UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1', [id, passwordHash, new Date(now)]);
  }

  /** Changes the role and/or the ban; the user as it is afterwards. */
  async updateAccount(db: PoolClient, id: string, change: { role?: Role; banned?: boolean }, now: number): Promise<Account> {
    const { rows } = await db.query<AccountRow>(
      `UPDATE users SET
         role = coalesce($2, role),
         banned_at = CASE WHEN $3::boolean IS NULL THEN banned_at WHEN $3 THEN coalesce(banned_at, $4) ELSE NULL END,
         updated_at = $4
       WHERE id = $1 RETURNING ${ACCOUNT_COLUMNS}`,
      [id, change.role ?? null, change.banned ?? null, new Date(now)],
    );
    return toAccount(rows[0]!);
  }

  async deleteUser(db: PoolClient, id: string): Promise<void> {
    await db.query('DELETE FROM users WHERE id = $1', [id]);
  }

  /**
   * Locks every active admin (in id order, so two transactions never wait on
   * each other crosswise) and returns their ids: the last-admin rule is then
   * decided on rows nobody else can change until this transaction ends.
   * A banned admin is not counted: nobody can use it.
   */
  async lockActiveAdmins(db: PoolClient): Promise<string[]> {
    const { rows } = await db.query<{ id: string }>(
      "SELECT id FROM users WHERE role = 'admin' AND banned_at IS NULL ORDER BY id FOR UPDATE",
    );
    return rows.map((row) => row.id);
  }
}

/** `text` as a LIKE pattern that matches only itself (escape character `\`). */
function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
