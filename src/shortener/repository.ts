import { type Pool, withTransaction } from '../kit/db.js';
import { DAY_MS, HOUR_MS, isoDay, type SaltStore, type Visit } from './visits.js';

export interface Link {
  code: string;
  original_url: string;
  clicks: number;
  created_at: Date;
  expires_at: Date | null;
  max_visits: number | null;
  disabled: boolean;
}

/** Why a link no longer redirects. */
export type Refusal = 'disabled' | 'expired' | 'exhausted';

/** What one batch decided for one existing code. */
export interface Granted {
  original_url: string;
  /** How many of the batch's clicks on this code were counted (the first ones in arrival order). */
  granted: number;
  /** Why the others were refused (null when all were counted). */
  refusal: Refusal | null;
  expires_at: Date | null;
  max_visits: number | null;
}

/** One click of a batch with its visit: the ordinal counts the clicks of its code in arrival order, from 1. */
export interface BatchVisit {
  code: string;
  ordinal: number;
  visit: Visit;
}

export interface VisitRow {
  kind: 'series' | 'referrers' | 'browsers' | 'operating_systems' | 'devices' | 'unique';
  /** series: bucket number (epoch seconds / bucket seconds); top lists: rank. */
  position: number;
  /** series: traffic class; top lists: the name. */
  name: string;
  visits: number;
}

const LINK_COLUMNS = 'code, original_url, clicks, created_at, expires_at, max_visits, disabled';

/** The only place that speaks SQL for links and their visits. */
export class LinkRepository implements SaltStore {
  constructor(private readonly pool: Pool) {}

  /** Throws PostgreSQL's unique violation (constraint links_pkey) when the code is taken. */
  async insert(code: string, originalUrl: string, expiresAt: Date | null = null, maxVisits: number | null = null): Promise<Link> {
    const { rows } = await this.pool.query<Link>(
      `INSERT INTO links (code, original_url, expires_at, max_visits) VALUES ($1, $2, $3, $4) RETURNING ${LINK_COLUMNS}`,
      [code, originalUrl, expiresAt, maxVisits],
    );
    return rows[0]!;
  }

  async find(code: string): Promise<Link | undefined> {
    const { rows } = await this.pool.query<Link>({
      name: 'links_find',
      text: `SELECT ${LINK_COLUMNS} FROM links WHERE code = $1`,
      values: [code],
    });
    return rows[0];
  }

  /**
   * Counts a batch of clicks and records their visits in one statement, so
   * both commit together or not at all. Returns, per existing code, how many
   * of its clicks were counted and why the others were not.
   *
   * Rows are first locked in code order (SELECT … ORDER BY … FOR UPDATE):
   * concurrent batches, from other instances too, then cannot deadlock. (An
   * UPDATE … FROM alone locks in its join plan's order; the resilience load
   * test found 40P01 deadlocks once the table outgrew a nested loop.) The
   * lock also makes max_visits exact: each batch reads the count the previous
   * one committed and takes at most what remains. Visit rows belong to one
   * link and are only written under that link's lock, so they add no lock
   * order of their own.
   */
  async addClicks(codes: string[], counts: number[], visits: BatchVisit[], now: Date): Promise<Map<string, Granted>> {
    const { rows } = await this.pool.query<Granted & { code: string }>({
      name: 'links_add_clicks',
      text: `WITH batch AS (
               SELECT * FROM unnest($1::text[], $2::int[]) AS b(code, n)
             ),
             locked AS MATERIALIZED (
               SELECT l.code, l.original_url, l.clicks, l.max_visits, l.expires_at, l.disabled
               FROM links AS l JOIN batch USING (code)
               ORDER BY l.code
               FOR UPDATE OF l
             ),
             decided AS MATERIALIZED (
               SELECT k.code, k.original_url, k.max_visits, k.expires_at,
                      CASE WHEN k.disabled OR k.expires_at <= $3 THEN 0
                           WHEN k.max_visits IS NULL THEN b.n
                           ELSE least(b.n, greatest(k.max_visits - k.clicks, 0)) END AS granted,
                      CASE WHEN k.disabled THEN 'disabled'
                           WHEN k.expires_at <= $3 THEN 'expired'
                           WHEN k.clicks + b.n > k.max_visits THEN 'exhausted' END AS refusal
               FROM locked AS k JOIN batch AS b USING (code)
             ),
             counted AS (
               UPDATE links AS l SET clicks = l.clicks + d.granted
               FROM decided AS d
               WHERE l.code = d.code AND d.granted > 0
             ),
             visits AS MATERIALIZED (
               SELECT v.code, to_timestamp(v.hour_number * 3600) AS hour, v.class, v.referrer, v.browser, v.os, v.device, v.visitor_key
               FROM unnest($4::text[], $5::int[], $6::int[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[])
                      AS v(code, ordinal, hour_number, class, referrer, browser, os, device, visitor_key)
               JOIN decided AS d USING (code)
               WHERE v.ordinal <= d.granted
             ),
             aggregated AS (
               INSERT INTO visit_counts AS c (code, hour, class, referrer, browser, os, device, visits)
               SELECT code, hour, class, referrer, browser, os, device, count(*) FROM visits
               GROUP BY code, hour, class, referrer, browser, os, device
               ON CONFLICT (code, hour, class, referrer, browser, os, device)
               DO UPDATE SET visits = c.visits + EXCLUDED.visits
             ),
             uniques AS (
               INSERT INTO daily_visitors (code, day, visitor_key)
               SELECT DISTINCT code, (hour AT TIME ZONE 'UTC')::date, visitor_key FROM visits
               ON CONFLICT DO NOTHING
             )
             SELECT code, original_url, granted, refusal, max_visits, expires_at FROM decided`,
      values: [
        codes,
        counts,
        now,
        visits.map((v) => v.code),
        visits.map((v) => v.ordinal),
        // Hours since the epoch: a number array is far cheaper to serialise than Date objects.
        visits.map((v) => v.visit.hour / HOUR_MS),
        visits.map((v) => v.visit.class),
        visits.map((v) => v.visit.referrer),
        visits.map((v) => v.visit.browser),
        visits.map((v) => v.visit.os),
        visits.map((v) => v.visit.device),
        visits.map((v) => v.visit.visitorKey),
      ],
    });
    return new Map(rows.map(({ code, ...granted }) => [code, granted]));
  }

  /**
   * The salt of a UTC day, created when missing; earlier days' salts are
   * deleted in the same statement. When another instance inserts the day's
   * salt at the same moment, ON CONFLICT waits for it but this statement's
   * snapshot cannot see it: the lookup is then repeated.
   */
  async saltOf(day: string, candidate: Buffer): Promise<Buffer> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const { rows } = await this.pool.query<{ salt: Buffer }>(
        `WITH expired AS (DELETE FROM visitor_salts WHERE day < $1::date),
              created AS (INSERT INTO visitor_salts (day, salt) VALUES ($1::date, $2) ON CONFLICT (day) DO NOTHING RETURNING salt)
         SELECT salt FROM created UNION ALL SELECT salt FROM visitor_salts WHERE day = $1::date`,
        [day, candidate],
      );
      if (rows[0]) return rows[0].salt;
    }
    throw new Error(`no visitor salt for ${day}`);
  }

  /** Deletes the salts of days before the given one (YYYY-MM-DD); returns how many. */
  async deleteSaltsBefore(day: string): Promise<number> {
    const { rowCount } = await this.pool.query('DELETE FROM visitor_salts WHERE day < $1::date', [day]);
    return rowCount ?? 0;
  }

  /**
   * A link's visits in [from, to): per bucket of bucketSeconds and class, the
   * top 10 names of each dimension, and the sum of daily unique visitors over
   * the days [firstDay, endDay). One statement, so all parts see one snapshot,
   * the same side of any rollup (migration 005). Days rolled up and before
   * `wholeDaysEnd` (a UTC midnight; `from` for hourly buckets, so none) are
   * read from the daily rows, the rest from the hourly rows.
   */
  async visitRows(code: string, from: Date, to: Date, bucketSeconds: number, firstDay: string, endDay: string, wholeDaysEnd: Date): Promise<VisitRow[]> {
    const { rows } = await this.pool.query<VisitRow>({
      name: 'links_visit_rows',
      text: `WITH daily_until AS MATERIALIZED (
               SELECT least(before::timestamp AT TIME ZONE 'UTC', $7::timestamptz) AS until, before FROM visit_rollup
             ),
             -- Rows with their start in seconds since the epoch, as integers (cheap to divide into buckets).
             counts AS (
               SELECT (day - DATE '1970-01-01')::bigint * 86400 AS start, class, referrer, browser, os, device, visits FROM visit_days
               WHERE code = $1 AND day >= ($2::timestamptz AT TIME ZONE 'UTC')::date
                 AND day < (SELECT (until AT TIME ZONE 'UTC')::date FROM daily_until)
               UNION ALL
               SELECT date_part('epoch', hour)::bigint, class, referrer, browser, os, device, visits FROM visit_counts
               WHERE code = $1 AND hour >= greatest($2::timestamptz, (SELECT until FROM daily_until)) AND hour < $3
             ),
             -- One pass over the rows for the series and the four top lists.
             grouped AS (
               SELECT CASE WHEN grouping(bucket) = 0 THEN 'series'
                           WHEN grouping(referrer) = 0 THEN 'referrers'
                           WHEN grouping(browser) = 0 THEN 'browsers'
                           WHEN grouping(os) = 0 THEN 'operating_systems'
                           ELSE 'devices' END AS kind,
                      bucket, coalesce(class, referrer, browser, os, device) AS name, sum(visits) AS visits
               FROM (SELECT start / $4::bigint AS bucket, class, referrer, browser, os, device, visits FROM counts) AS c
               GROUP BY GROUPING SETS ((bucket, class), (referrer), (browser), (os), (device))
             ),
             ranked AS (
               SELECT kind, name, visits, row_number() OVER (PARTITION BY kind ORDER BY visits DESC, name) AS position
               FROM grouped WHERE kind <> 'series'
             )
             SELECT kind, bucket AS position, name, visits::bigint FROM grouped WHERE kind = 'series'
             UNION ALL
             SELECT kind, position, name, visits::bigint FROM ranked WHERE position <= 10
             UNION ALL
             SELECT 'unique', 0, '',
                    ((SELECT coalesce(sum(visitors), 0) FROM visitor_days
                      WHERE code = $1 AND day >= $5::date AND day < least($6::date, (SELECT before FROM daily_until)))
                     + (SELECT count(*) FROM daily_visitors
                        WHERE code = $1 AND day >= greatest($5::date, (SELECT before FROM daily_until)) AND day < $6::date))::bigint`,
      values: [code, from, to, bucketSeconds, firstDay, endDay, wholeDaysEnd],
    });
    return rows;
  }

  /**
   * Rolls up the oldest day not yet rolled up, if it is before `before`
   * (YYYY-MM-DD): its hourly rows summed per day into visit_days, its
   * visitors counted into visitor_days, and visit_rollup.before moved past
   * it, in one transaction. Returns the new `before`, or undefined when every
   * day before `before` already is. One day per transaction keeps each one
   * short however large the tables; the row lock on visit_rollup makes
   * instances doing it at once roll up each day once.
   */
  rollUpVisitDay(before: string): Promise<string | undefined> {
    return withTransaction(this.pool, async (client) => {
      const { rows: state } = await client.query<{ since: string | null }>(
        `SELECT CASE WHEN before <> '-infinity' THEN to_char(before, 'YYYY-MM-DD')
                     -- The first rollup starts at the oldest visit (none: nothing to roll up).
                     ELSE (SELECT to_char(least(min(hour AT TIME ZONE 'UTC')::date, $1::date), 'YYYY-MM-DD') FROM visit_counts) END AS since
         FROM visit_rollup WHERE before < $1::date FOR UPDATE`,
        [before],
      );
      if (state.length === 0) return undefined;
      const since = state[0]!.since ?? before;
      const until = since < before ? isoDay(Date.parse(since) + DAY_MS) : before;
      // Bounds as parameters, so the plan can use the BRIN indexes on hour and day.
      await client.query(
        `INSERT INTO visit_days (code, day, class, referrer, browser, os, device, visits)
         SELECT code, $1::date, class, referrer, browser, os, device, sum(visits) FROM visit_counts
         WHERE hour >= $2::timestamptz AND hour < $3::timestamptz
         GROUP BY code, class, referrer, browser, os, device`,
        [since, `${since}T00:00:00Z`, `${until}T00:00:00Z`],
      );
      await client.query(
        `INSERT INTO visitor_days (code, day, visitors)
         SELECT code, day, count(*) FROM daily_visitors WHERE day >= $1::date AND day < $2::date GROUP BY code, day`,
        [since, until],
      );
      await client.query('UPDATE visit_rollup SET before = $1::date', [until]);
      return until;
    });
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
