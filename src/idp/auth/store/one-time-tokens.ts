import type { Pool, PoolClient } from '../../../kit/db.js';

// The SQL of GoTrue's one-time tokens (models/one_time_token.go): the links and codes of the idp's
// mails, stored as digests, each used once.

export type OneTimeTokenType =
  | 'confirmation_token'
  | 'recovery_token'
  | 'email_change_token_current'
  | 'email_change_token_new'
  | 'reauthentication_token';

/** The column that records when a token of each kind was last sent. */
const SENT_AT_COLUMN: Record<OneTimeTokenType, string> = {
  confirmation_token: 'confirmation_sent_at',
  recovery_token: 'recovery_sent_at',
  email_change_token_current: 'email_change_sent_at',
  email_change_token_new: 'email_change_sent_at',
  reauthentication_token: 'reauthentication_sent_at',
};

export class OneTimeTokenStore {
  constructor(private readonly pool: Pool) {}

  /**
   * Replaces the user's token of this kind (one live token per kind, as GoTrue) and records when it
   * was sent. `digest` is the SHA-256 of the link's token, `codeDigest` that of the code's hash: the
   * table never holds a usable token.
   */
  async issueOneTimeToken(
    client: PoolClient,
    token: { userId: string; type: OneTimeTokenType; digest: string; codeDigest: string; relatesTo: string; now: Date },
  ): Promise<void> {
    await client.query(
      `INSERT INTO auth.one_time_tokens (user_id, token_type, token_hash, code_hash, relates_to, created_at)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (user_id, token_type) DO UPDATE SET token_hash = EXCLUDED.token_hash, code_hash = EXCLUDED.code_hash,
         relates_to = EXCLUDED.relates_to, created_at = EXCLUDED.created_at`,
      [token.userId, token.type, token.digest, token.codeDigest, token.relatesTo, token.now],
    );
    const sentAt = SENT_AT_COLUMN[token.type];
    await client.query(`UPDATE auth.users SET ${sentAt} = $2, updated_at = $2 WHERE id = $1`, [token.userId, token.now]);
  }

  /**
   * Uses a token: deletes its row when it is of one of `types` and was issued after `issuedAfter`,
   * and returns whose it was. A single DELETE, so of two concurrent uses exactly one gets the row;
   * an expired token is not used up, and answers like an unknown one.
   */
  async useOneTimeToken(
    client: PoolClient,
    digest: string,
    types: readonly OneTimeTokenType[],
    issuedAfter: Date,
  ): Promise<{ userId: string; type: OneTimeTokenType; relatesTo: string } | undefined> {
    const { rows } = await client.query<{ user_id: string; token_type: OneTimeTokenType; relates_to: string }>(
      `DELETE FROM auth.one_time_tokens WHERE token_hash = $1 AND token_type = ANY($2) AND created_at > $3
       RETURNING user_id, token_type, relates_to`,
      [digest, types, issuedAfter],
    );
    const row = rows[0];
    return row && { userId: row.user_id, type: row.token_type, relatesTo: row.relates_to };
  }

  /**
   * The live tokens of `types` mailed to `address`, each known by its link digest (unique per issued
   * token): what a code typed with that address may be compared against.
   */
  async liveTokensMailedTo(address: string, types: readonly OneTimeTokenType[], issuedAfter: Date): Promise<string[]> {
    const { rows } = await this.pool.query<{ token_hash: string }>(
      `SELECT token_hash FROM auth.one_time_tokens WHERE relates_to = $1 AND token_type = ANY($2) AND created_at > $3`,
      [address, types, issuedAfter],
    );
    return rows.map((row) => row.token_hash);
  }

  /**
   * Uses the token among `tokens` (link digests) whose code digest is `codeDigest`, as useOneTimeToken
   * does for a link.
   */
  async useOneTimeCode(
    client: PoolClient,
    tokens: readonly string[],
    codeDigest: string,
    types: readonly OneTimeTokenType[],
    issuedAfter: Date,
  ): Promise<{ userId: string; type: OneTimeTokenType; relatesTo: string } | undefined> {
    const { rows } = await client.query<{ user_id: string; token_type: OneTimeTokenType; relates_to: string }>(
      `DELETE FROM auth.one_time_tokens WHERE token_hash = ANY($1) AND code_hash = $2 AND token_type = ANY($3) AND created_at > $4
       RETURNING user_id, token_type, relates_to`,
      [tokens, codeDigest, types, issuedAfter],
    );
    const row = rows[0];
    return row && { userId: row.user_id, type: row.token_type, relatesTo: row.relates_to };
  }

  /** Voids tokens (by link digest): too many wrong codes were tried against them. */
  async voidOneTimeTokens(tokens: readonly string[]): Promise<void> {
    await this.pool.query(`DELETE FROM auth.one_time_tokens WHERE token_hash = ANY($1)`, [tokens]);
  }
}
