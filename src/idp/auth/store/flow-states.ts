import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from '../../../kit/db.js';

// The SQL of GoTrue's PKCE flow states (models/flow_state.go): a mailed link's challenge, then the
// auth code its verification issues, exchanged once.

export class FlowStateStore {
  constructor(private readonly pool: Pool) {}

  /** A PKCE flow state for a mail about to be sent (GoTrue's NewFlowStateWithUserID). */
  async createFlowState(
    client: PoolClient,
    flow: { userId: string; challenge: string; method: 's256' | 'plain'; authenticationMethod: string; now: Date },
  ): Promise<void> {
    await client.query(
      `INSERT INTO auth.flow_state (id, user_id, code_challenge, code_challenge_method, authentication_method, created_at)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [randomUUID(), flow.userId, flow.challenge, flow.method, flow.authenticationMethod, flow.now],
    );
  }

  /**
   * After the link of a PKCE mail was verified: the user's newest flow state of that method made
   * since `createdAfter` gets the auth code's digest. False when there is none.
   */
  async issueAuthCode(
    client: PoolClient,
    userId: string,
    authenticationMethod: string,
    codeDigest: string,
    createdAfter: Date,
    now: Date,
  ): Promise<boolean> {
    const { rowCount } = await client.query(
      `UPDATE auth.flow_state SET auth_code_hash = $3, auth_code_issued_at = $5
        WHERE id = (SELECT id FROM auth.flow_state
                     WHERE user_id = $1 AND authentication_method = $2 AND auth_code_hash IS NULL AND created_at > $4
                     ORDER BY created_at DESC LIMIT 1)`,
      [userId, authenticationMethod, codeDigest, createdAfter, now],
    );
    return rowCount === 1;
  }

  async findFlowStateByCode(
    codeDigest: string,
  ): Promise<{ id: string; userId: string; challenge: string; method: 's256' | 'plain'; issuedAt: Date } | undefined> {
    const { rows } = await this.pool.query<{
      id: string;
      user_id: string;
      code_challenge: string;
      code_challenge_method: 's256' | 'plain';
      auth_code_issued_at: Date;
    }>(`SELECT id, user_id, code_challenge, code_challenge_method, auth_code_issued_at FROM auth.flow_state WHERE auth_code_hash = $1`, [
      codeDigest,
    ]);
    const row = rows[0];
    return row
      ? {
          id: row.id,
          userId: row.user_id,
          challenge: row.code_challenge,
          method: row.code_challenge_method,
          issuedAt: row.auth_code_issued_at,
        }
      : undefined;
  }

  /** Deletes a flow state; true for the one caller that did (an auth code is exchanged once). */
  async deleteFlowState(id: string): Promise<boolean> {
    const { rowCount } = await this.pool.query('DELETE FROM auth.flow_state WHERE id = $1', [id]);
    return rowCount === 1;
  }
}
