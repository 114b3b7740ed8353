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
}

export const UNIQUE_CODE_CONSTRAINT = 'links_pkey';
