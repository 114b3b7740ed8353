import { type Pool, isUniqueViolation } from '../kit/db.js';

export type Role = 'user' | 'admin';

/** The only user shape that leaves this module (and the service). */
export interface PublicUser {
  id: string;
  name: string;
  email: string;
  role: Role;
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
  created_at: Date;
  updated_at: Date;
}

const PUBLIC_COLUMNS = 'id, name, email, role, created_at, updated_at';
const EMAIL_INDEX = 'users_email_lower_key';

function toPublicUser(row: UserRow): PublicUser {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    role: row.role,
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
  async insertUser(user: NewUser): Promise<PublicUser> {
    try {
      const { rows } = await this.pool.query<UserRow>(
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
  async insertUserIfAbsent(user: NewUser): Promise<PublicUser | undefined> {
    const { rows } = await this.pool.query<UserRow>(
      `INSERT INTO users (name, email, password_hash, role) VALUES ($1, $2, $3, $4)
       ON CONFLICT ((lower(email))) DO NOTHING RETURNING ${PUBLIC_COLUMNS}`,
      [user.name, user.email, user.passwordHash, user.role],
    );
    return rows[0] ? toPublicUser(rows[0]) : undefined;
  }

  // The two hot queries (every /auth/me, every login) are named: each connection
  // parses and plans them once instead of on every call.
  async findUserById(id: string): Promise<PublicUser | undefined> {
    const { rows } = await this.pool.query<UserRow>({
      name: 'accounts-find-user-by-id',
      text: `SELECT ${PUBLIC_COLUMNS} FROM users WHERE id = $1`,
      values: [id],
    });
    return rows[0] ? toPublicUser(rows[0]) : undefined;
  }

  async findUserByEmail(email: string): Promise<PublicUser | undefined> {
    const { rows } = await this.pool.query<UserRow>(`SELECT ${PUBLIC_COLUMNS} FROM users WHERE lower(email) = lower($1)`, [
      email,
    ]);
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

  /** One page in a stable order (created_at, then id) and the total, read in one statement (one snapshot). */
  async listUsers(page: { limit: number; offset: number }): Promise<{ total: number; users: PublicUser[] }> {
    const { rows } = await this.pool.query<{ total: number } & { [K in keyof UserRow]: UserRow[K] | null }>(
      `WITH total AS (SELECT count(*) AS total FROM users)
       SELECT total.total, page.* FROM total
       LEFT JOIN LATERAL (
         SELECT ${PUBLIC_COLUMNS} FROM users ORDER BY created_at, id LIMIT $1 OFFSET $2
       ) page ON true
       ORDER BY page.created_at, page.id`,
      [page.limit, page.offset],
    );
    const total = rows[0]?.total ?? 0;
    const users = rows.filter((row): row is typeof row & UserRow => row.id !== null).map(toPublicUser);
    return { total, users };
  }
}
