import type { Pool } from '../kit/db.js';

export interface Link {
  code: string;
  original_url: string;
  clicks: number;
  created_at: Date;
}

/** The only place that speaks SQL for links. */
export class LinkRepository {
  constructor(private readonly pool: Pool) {}

  /** Throws PostgreSQL's unique violation (constraint links_pkey) when the code is taken. */
  async insert(code: string, originalUrl: string): Promise<Link> {
    const { rows } = await this.pool.query<Link>(
      'INSERT INTO links (code, original_url) VALUES ($1, $2) RETURNING code, original_url, clicks, created_at',
      [code, originalUrl],
    );
    return rows[0]!;
  }

  async find(code: string): Promise<Link | undefined> {
    const { rows } = await this.pool.query<Link>({
      name: 'links_find',
      text: 'SELECT code, original_url, clicks, created_at FROM links WHERE code = $1',
      values: [code],
    });
    return rows[0];
  }

  /**
   * Adds clicks to many codes in one statement and returns the URL of each
   * code that exists. Concurrent batches (from other instances, or several in
   * flight) must lock rows in one global order or they deadlock.
   * An UPDATE … FROM locks rows in whatever order its join plan visits them
   * (with a hash join: heap order, which every update changes), so the rows are
   * first locked in code order by SELECT … ORDER BY … FOR UPDATE; the UPDATE
   * then only touches rows it already holds. (Found by the resilience load
   * test: 40P01 deadlocks answered 500 once the table outgrew a nested loop.)
   */
  async addClicks(codes: string[], counts: number[]): Promise<Map<string, string>> {
    const { rows } = await this.pool.query<{ code: string; original_url: string }>({
      name: 'links_add_clicks',
      text: `UPDATE links AS l SET clicks = l.clicks + b.n
             FROM (
               SELECT locked.code, batch.n
               FROM links AS locked JOIN unnest($1::text[], $2::int[]) AS batch(code, n) USING (code)
               ORDER BY locked.code
               FOR UPDATE OF locked
             ) AS b
             WHERE l.code = b.code
             RETURNING l.code, l.original_url`,
      values: [codes, counts],
    });
    return new Map(rows.map((r) => [r.code, r.original_url]));
  }

  /**
   * One page of links, newest first (then by code, so the order is stable), and
   * the number of links that match, read in one statement (one snapshot).
   * `search` matches the code exactly or the URL as a case-insensitive substring.
   */
  async listForAdmin(search: string | undefined, page: { limit: number; offset: number }): Promise<{ total: number; links: AdminLink[] }> {
    // LIKE's own wildcards and escape character in the search are matched literally.
    const pattern = search === undefined ? null : `%${search.replace(/[\\%_]/g, '\\$&')}%`;
    const { rows } = await this.pool.query<{ total: number } & { [K in keyof AdminLink]: AdminLink[K] | null }>({
      name: 'links_admin_list',
      text: `WITH matched AS (
               SELECT ${ADMIN_COLUMNS} FROM links
               WHERE $1::text IS NULL OR code = $1 OR original_url ILIKE $2 ESCAPE '\\'
             ), total AS (SELECT count(*) AS total FROM matched)
             SELECT total.total, page.* FROM total
             LEFT JOIN LATERAL (
               SELECT * FROM matched ORDER BY created_at DESC, code DESC LIMIT $3 OFFSET $4
             ) page ON true
             ORDER BY page.created_at DESC, page.code DESC`,
      values: [search ?? null, pattern, page.limit, page.offset],
    });
    const total = rows[0]?.total ?? 0;
    return { total, links: rows.filter((row): row is typeof row & AdminLink => row.code !== null) };
  }

  /** Sets the lifecycle fields that are given (undefined leaves a field as it is); undefined for an unknown code. */
  async updateLifecycle(code: string, changes: LifecycleChanges): Promise<AdminLink | undefined> {
    const { rows } = await this.pool.query<AdminLink>({
      name: 'links_admin_update',
      text: `UPDATE links SET
               expires_at = CASE WHEN $2::boolean THEN $3::timestamptz ELSE expires_at END,
               max_visits = CASE WHEN $4::boolean THEN $5::bigint ELSE max_visits END,
               disabled = COALESCE($6::boolean, disabled)
             WHERE code = $1
             RETURNING ${ADMIN_COLUMNS}`,
      values: [
        code,
        changes.expiresAt !== undefined,
        changes.expiresAt ?? null,
        changes.maxVisits !== undefined,
        changes.maxVisits ?? null,
        changes.disabled ?? null,
      ],
    });
    return rows[0];
  }

  /**
   * Deletes the link and tombstones its code in one statement, hence one
   * transaction (see migration 004 for why a create can then never reuse it).
   * Rows that reference the link go with it through their foreign keys.
   * Returns the link as it was, or undefined for an unknown code.
   */
  async deleteAndTombstone(code: string): Promise<AdminLink | undefined> {
    const { rows } = await this.pool.query<AdminLink>({
      name: 'links_admin_delete',
      text: `WITH gone AS (
               DELETE FROM links WHERE code = $1 RETURNING ${ADMIN_COLUMNS}
             ), tombstone AS (
               INSERT INTO deleted_codes (code) SELECT code FROM gone
             )
             SELECT * FROM gone`,
      values: [code],
    });
    return rows[0];
  }
}

export const UNIQUE_CODE_CONSTRAINT = 'links_pkey';

/** Raised (by a trigger) when a create picks the code of a deleted link: a duplicate code, retried like one. */
export const DELETED_CODE_CONSTRAINT = 'deleted_codes_pkey';

/** A link with its lifecycle fields, as the admin API shows it. */
export interface AdminLink extends Link {
  expires_at: Date | null;
  max_visits: number | null;
  disabled: boolean;
}

/** What an admin may change; a field left undefined keeps its value, null clears it. */
export interface LifecycleChanges {
  expiresAt?: Date | null;
  maxVisits?: number | null;
  disabled?: boolean;
}

const ADMIN_COLUMNS = 'code, original_url, clicks, created_at, expires_at, max_visits, disabled';
