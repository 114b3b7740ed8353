import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Pool, PoolClient } from '../kit/db.js';

/** A pool, or the client of a transaction the audit row must be part of. */
export type Queryable = Pool | PoolClient;

/** What the audit log records. Each name is what happened, in the past tense. */
export const AUDIT_EVENTS = [
  'user_registered',
  'login_succeeded',
  'login_failed',
  'login_throttled',
  'login_refused_banned',
  'refresh_token_reused',
  'logged_out',
  'logged_out_everywhere',
  'session_ended',
  'password_changed',
  'password_change_failed',
  'role_changed',
  'user_banned',
  'user_unbanned',
  'user_deleted',
  'access_denied',
  'password_reset_requested',
  'password_reset_completed',
  'email_verification_sent',
  'email_verification_requested',
  'email_verified',
  'login_refused_unverified',
  'second_factor_required',
  'second_factor_failed',
  'second_factor_throttled',
  'factor_added',
  'factor_removed',
  'recovery_code_used',
  'recovery_codes_regenerated',
  'factors_reset',
  'email_signin_requested',
  'passkey_added',
  'passkey_removed',
  'new_device_sign_in',
] as const;

export type AuditEventName = (typeof AUDIT_EVENTS)[number];

/** Where a request came from: the client address and its user agent. */
export interface Origin {
  ip: string;
  userAgent?: string;
}

/** The longest user agent kept; anything beyond is a client padding the log. */
const USER_AGENT_MAX = 512;

/** Who is asking, for the log lines and the audit log. */
export interface AuditContext extends Origin {
  log: FastifyBaseLogger;
}

export function originOf(request: FastifyRequest): Origin {
  const agent = request.headers['user-agent'];
  return { ip: request.ip, userAgent: typeof agent === 'string' ? agent.slice(0, USER_AGENT_MAX) : undefined };
}

export interface AuditEntry {
  event: AuditEventName;
  /** Who acted (the caller); unknown for a failed login. */
  actorId?: string;
  /** Whom it concerns. */
  targetId?: string;
  origin: Origin;
  /**
   * Non-secret facts (a role change's old and new role, why a login failed, a session id).
   * Never a password, hash, token or raw email.
   */
  details?: Record<string, string>;
}

export interface AuditRecord {
  id: number;
  at: string;
  event: AuditEventName;
  actor_id: string | null;
  target_id: string | null;
  ip: string | null;
  user_agent: string | null;
  details: Record<string, string>;
}

export interface AuditQuery {
  limit: number;
  offset: number;
  /** Entries where this user is the actor or the target. */
  userId?: string;
  event?: AuditEventName;
}

/** The append-only audit log (INSERT and SELECT only: see migration 002). */
export class AuditLog {
  constructor(
    private readonly pool: Pool,
    private readonly clock: () => number,
  ) {}

  /**
   * Written through `db` when given (the client of the action's transaction: the
   * row commits or rolls back with the action), else alone.
   */
  async record(entry: AuditEntry, db: Queryable = this.pool): Promise<void> {
    await db.query(`INSERT INTO audit_log (at, event, actor_id, target_id, ip, user_agent, details) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
      new Date(this.clock()),
      entry.event,
      entry.actorId ?? null,
      entry.targetId ?? null,
      entry.origin.ip,
      entry.origin.userAgent ?? null,
      JSON.stringify(entry.details ?? {}),
    ]);
  }

  /** Newest first, with the total, read in one statement (one snapshot), like the user listing. */
  async page(query: AuditQuery): Promise<{ total: number; entries: AuditRecord[] }> {
    const { rows } = await this.pool.query<{ total: number } & { [K in keyof AuditRecord]: AuditRecord[K] | null } & { at: Date | null }>(
      `WITH matching AS (
         SELECT * FROM audit_log
         WHERE ($3::uuid IS NULL OR actor_id = $3 OR target_id = $3) AND ($4::text IS NULL OR event = $4)
       ), total AS (SELECT count(*) AS total FROM matching)
       SELECT total.total, page.* FROM total
       LEFT JOIN LATERAL (SELECT * FROM matching ORDER BY id DESC LIMIT $1 OFFSET $2) page ON true
       ORDER BY page.id DESC`,
      [query.limit, query.offset, query.userId ?? null, query.event ?? null],
    );
    const total = rows[0]?.total ?? 0;
    const entries = rows
      .filter((row) => row.id !== null)
      .map((row) => ({
        id: row.id!,
        at: row.at!.toISOString(),
        event: row.event!,
        actor_id: row.actor_id,
        target_id: row.target_id,
        ip: row.ip,
        user_agent: row.user_agent,
        details: row.details ?? {},
      }));
    return { total, entries };
  }
}
