import { type Pool, withTransaction } from '../kit/db.js';
import type { LinkRules } from './link-rules.js';
import { DAY_MS, HOUR_MS, isoDay, type SaltStore, type Visit } from './visits.js';

export interface Link {
  code: string;
  original_url: string;
  clicks: number;
  created_at: Date;
  expires_at: Date | null;
  max_visits: number | null;
  disabled: boolean;
  /** SHA-256 of the link's manage token (null for links created before tokens existed). Never shown. */
  manage_token_hash: Buffer | null;
  /** The API key the link was created with (null: anonymous or by the admin). */
  owner_key_id: number | null;
  /** A name for people who manage links; never part of the public stats. */
  title: string | null;
  /** Lower-case tags to find the link by; never part of the public stats. */
  tags: string[];
  /** Device rules and A/B split (link-rules.ts); null when none. Never part of the public stats. */
  rules: LinkRules | null;
  /** bcrypt hash of the link's password (null: open to anyone). Never shown; only `password_protected`. */
  password_hash: string | null;
}

/** An API key as stored, without its digest. */
export interface ApiKey {
  id: number;
  name: string;
  role: 'author' | 'manager';
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const API_KEY_COLUMNS = 'id::int, name, role, created_at, last_used_at, revoked_at';

/** A destination a link had before a change. */
export interface PastDestination {
  original_url: string;
  replaced_at: Date;
}

/** Why a link no longer redirects. */
export type Refusal = 'disabled' | 'expired' | 'exhausted';

/** Why a batch did not count a click: the link refuses, or it asks for its password first. */
export type ClickRefusal = Refusal | 'password';

/** What one batch decided for one existing code. */
export interface Granted {
  original_url: string;
  /** How many of the batch's clicks on this code were counted (the first ones in arrival order). */
  granted: number;
  /** Why the others were refused (null when all were counted). */
  refusal: ClickRefusal | null;
  expires_at: Date | null;
  max_visits: number | null;
  /** The link's rules, read with the same locked row: the redirect picks its destination without another query. */
  rules: LinkRules | null;
}

/** One click of a batch with its visit: the ordinal counts the clicks of its code in arrival order, from 1. */
export interface BatchVisit {
  code: string;
  ordinal: number;
  visit: Visit;
}

export interface VisitRow {
  kind: 'series' | 'referrers' | 'browsers' | 'operating_systems' | 'devices' | 'countries' | 'unique';
  /** series: bucket number (epoch seconds / bucket seconds); top lists: rank. */
  position: number;
  /** series: traffic class; top lists: the name. */
  name: string;
  visits: number;
}

/** Every column of a link the service reads: one list, so every query returns the same shape. */
const LINK_COLUMNS =
  'code, original_url, clicks, created_at, expires_at, max_visits, disabled, manage_token_hash, owner_key_id::int, title, tags, rules, password_hash';

/** The only place that speaks SQL for links and their visits. */
export class LinkRepository implements SaltStore {
  constructor(private readonly pool: Pool) {}

  /** Throws PostgreSQL's unique violation (constraint links_pkey) when the code is taken. */
  async insert(code: string, originalUrl: string, fields: NewLinkFields = {}): Promise<Link> {
    const { rows } = await this.pool.query<Link>(
      `INSERT INTO links (code, original_url, expires_at, max_visits, manage_token_hash, owner_key_id, title, tags, rules, password_hash)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING ${LINK_COLUMNS}`,
      [
        code,
        originalUrl,
        fields.expiresAt ?? null,
        fields.maxVisits ?? null,
        fields.manageTokenHash ?? null,
        fields.ownerKeyId ?? null,
        fields.title ?? null,
        fields.tags ?? [],
        fields.rules ? JSON.stringify(fields.rules) : null,
        fields.passwordHash ?? null,
      ],
    );
    return rows[0]!;
  }

  /**
   * Inserts many links in one statement (one transaction, durable when it returns) and returns
   * those inserted. A row whose code a live link has (ON CONFLICT on the primary key) or a deleted
   * link had (the tombstone) is left out instead of failing the others; the caller tells which by
   * what is missing. The trigger of migration 004 stays the guarantee: a tombstone committed by a
   * delete the NOT EXISTS could not yet see makes the whole statement fail with
   * deleted_codes_pkey, inserting nothing, and the caller runs it again.
   */
  async insertMany(rows: Array<{ code: string; originalUrl: string; fields: NewLinkFields }>): Promise<Link[]> {
    const { rows: inserted } = await this.pool.query<Link>(
      `INSERT INTO links (code, original_url, expires_at, max_visits, manage_token_hash, owner_key_id, title, tags, rules)
       SELECT b.code, b.url, b.expires_at, b.max_visits, b.hash, b.owner, b.title, ARRAY(SELECT jsonb_array_elements_text(b.tags)), b.rules
       FROM unnest($1::text[], $2::text[], $3::timestamptz[], $4::bigint[], $5::bytea[], $6::bigint[], $7::text[], $8::jsonb[], $9::jsonb[])
              AS b(code, url, expires_at, max_visits, hash, owner, title, tags, rules)
       WHERE NOT EXISTS (SELECT 1 FROM deleted_codes AS d WHERE d.code = b.code)
       ON CONFLICT (code) DO NOTHING
       RETURNING ${LINK_COLUMNS}`,
      [
        rows.map((r) => r.code),
        rows.map((r) => r.originalUrl),
        rows.map((r) => r.fields.expiresAt ?? null),
        rows.map((r) => r.fields.maxVisits ?? null),
        rows.map((r) => r.fields.manageTokenHash ?? null),
        rows.map((r) => r.fields.ownerKeyId ?? null),
        rows.map((r) => r.fields.title ?? null),
        rows.map((r) => JSON.stringify(r.fields.tags ?? [])),
        rows.map((r) => (r.fields.rules ? JSON.stringify(r.fields.rules) : null)),
      ],
    );
    return inserted;
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
   *
   * A link with a password counts nothing from a plain redirect (refusal `password`, after the
   * lifecycle's refusals: a dead link says it is dead, password or not); only a batch of
   * `unlocked` clicks, each of whose password was verified, counts on it.
   */
  async addClicks(codes: string[], counts: number[], visits: BatchVisit[], now: Date, unlocked = false): Promise<Map<string, Granted>> {
    const { rows } = await this.pool.query<Granted & { code: string }>({
      name: 'links_add_clicks',
      text: `WITH batch AS (
               SELECT * FROM unnest($1::text[], $2::int[]) AS b(code, n)
             ),
             locked AS MATERIALIZED (
               SELECT l.code, l.original_url, l.clicks, l.max_visits, l.expires_at, l.disabled, l.rules,
                      l.password_hash IS NOT NULL AND NOT $14::boolean AS locked_out
               FROM links AS l JOIN batch USING (code)
               ORDER BY l.code
               FOR UPDATE OF l
             ),
             decided AS MATERIALIZED (
               SELECT k.code, k.original_url, k.max_visits, k.expires_at, k.rules,
                      CASE WHEN k.disabled OR k.expires_at <= $3 OR k.locked_out THEN 0
                           WHEN k.max_visits IS NULL THEN b.n
                           ELSE least(b.n, greatest(k.max_visits - k.clicks, 0)) END AS granted,
                      CASE WHEN k.disabled THEN 'disabled'
                           WHEN k.expires_at <= $3 THEN 'expired'
                           WHEN k.clicks >= k.max_visits THEN 'exhausted'
                           WHEN k.locked_out THEN 'password'
                           WHEN k.clicks + b.n > k.max_visits THEN 'exhausted' END AS refusal
               FROM locked AS k JOIN batch AS b USING (code)
             ),
             counted AS (
               UPDATE links AS l SET clicks = l.clicks + d.granted
               FROM decided AS d
               WHERE l.code = d.code AND d.granted > 0
             ),
             visits AS MATERIALIZED (
               SELECT v.code, to_timestamp(v.hour_number * 3600) AS hour, v.class, v.referrer, v.browser, v.os, v.device, v.country, v.visitor_key
               FROM unnest($4::text[], $5::int[], $6::int[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[], $13::text[])
                      AS v(code, ordinal, hour_number, class, referrer, browser, os, device, visitor_key, country)
               JOIN decided AS d USING (code)
               WHERE v.ordinal <= d.granted
             ),
             aggregated AS (
               INSERT INTO visit_counts AS c (code, hour, class, referrer, browser, os, device, country, visits)
               SELECT code, hour, class, referrer, browser, os, device, country, count(*) FROM visits
               GROUP BY code, hour, class, referrer, browser, os, device, country
               ON CONFLICT (code, hour, class, referrer, browser, os, device, country)
               DO UPDATE SET visits = c.visits + EXCLUDED.visits
             ),
             uniques AS (
               INSERT INTO daily_visitors (code, day, visitor_key)
               SELECT DISTINCT code, (hour AT TIME ZONE 'UTC')::date, visitor_key FROM visits
               ON CONFLICT DO NOTHING
             )
             SELECT code, original_url, granted, refusal, max_visits, expires_at, rules FROM decided`,
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
        // '' is "not known" in the table (a key column cannot be NULL).
        visits.map((v) => v.visit.country ?? ''),
        unlocked,
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
  async visitRows(
    code: string,
    from: Date,
    to: Date,
    bucketSeconds: number,
    firstDay: string,
    endDay: string,
    wholeDaysEnd: Date,
  ): Promise<VisitRow[]> {
    const { rows } = await this.pool.query<VisitRow>({
      name: 'links_visit_rows',
      text: `WITH daily_until AS MATERIALIZED (
               SELECT least(before::timestamp AT TIME ZONE 'UTC', $7::timestamptz) AS until, before FROM visit_rollup
             ),
             -- Rows with their start in seconds since the epoch, as integers (cheap to divide into buckets).
             counts AS (
               SELECT (day - DATE '1970-01-01')::bigint * 86400 AS start, class, referrer, browser, os, device, country, visits FROM visit_days
               WHERE code = $1 AND day >= ($2::timestamptz AT TIME ZONE 'UTC')::date
                 AND day < (SELECT (until AT TIME ZONE 'UTC')::date FROM daily_until)
               UNION ALL
               SELECT date_part('epoch', hour)::bigint, class, referrer, browser, os, device, country, visits FROM visit_counts
               WHERE code = $1 AND hour >= greatest($2::timestamptz, (SELECT until FROM daily_until)) AND hour < $3
             ),
             -- One pass over the rows for the series and the five top lists.
             grouped AS (
               SELECT CASE WHEN grouping(bucket) = 0 THEN 'series'
                           WHEN grouping(referrer) = 0 THEN 'referrers'
                           WHEN grouping(browser) = 0 THEN 'browsers'
                           WHEN grouping(os) = 0 THEN 'operating_systems'
                           WHEN grouping(device) = 0 THEN 'devices'
                           ELSE 'countries' END AS kind,
                      bucket, coalesce(class, referrer, browser, os, device, country) AS name, sum(visits) AS visits
               FROM (SELECT start / $4::bigint AS bucket, class, referrer, browser, os, device, country, visits FROM counts) AS c
               GROUP BY GROUPING SETS ((bucket, class), (referrer), (browser), (os), (device), (country))
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
        `INSERT INTO visit_days (code, day, class, referrer, browser, os, device, country, visits)
         SELECT code, $1::date, class, referrer, browser, os, device, country, sum(visits) FROM visit_counts
         WHERE hour >= $2::timestamptz AND hour < $3::timestamptz
         GROUP BY code, class, referrer, browser, os, device, country`,
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
  async listForAdmin(
    search: string | undefined,
    page: { limit: number; offset: number },
    ownerKeyId: number | null = null,
    tag: string | null = null,
  ): Promise<{ total: number; links: AdminLink[] }> {
    // LIKE's own wildcards and escape character in the search are matched literally.
    const pattern = search === undefined ? null : `%${search.replace(/[\\%_]/g, '\\$&')}%`;
    const { rows } = await this.pool.query<{ total: number } & { [K in keyof AdminLink]: AdminLink[K] | null }>({
      name: 'links_admin_list',
      text: `WITH matched AS (
               SELECT ${LINK_COLUMNS} FROM links
               WHERE ($1::text IS NULL OR code = $1 OR original_url ILIKE $2 ESCAPE '\\' OR title ILIKE $2 ESCAPE '\\')
                 AND ($5::bigint IS NULL OR owner_key_id = $5)
                 AND ($6::text IS NULL OR tags @> ARRAY[$6::text])
             ), total AS (SELECT count(*) AS total FROM matched)
             SELECT total.total, page.* FROM total
             LEFT JOIN LATERAL (
               SELECT * FROM matched ORDER BY created_at DESC, code DESC LIMIT $3 OFFSET $4
             ) page ON true
             ORDER BY page.created_at DESC, page.code DESC`,
      values: [search ?? null, pattern, page.limit, page.offset, ownerKeyId, tag],
    });
    const total = rows[0]?.total ?? 0;
    return { total, links: rows.filter((row): row is typeof row & AdminLink => row.code !== null) };
  }

  /**
   * The next page of links for an export, newest first, after the position `after` (the
   * created_at text and code of the last link of the previous page); the key's own links only
   * when `ownerKeyId` is set. Keyset paging, so each page is one index range scan (migrations
   * 007 and 011) however deep the export, and no statement holds a connection between pages.
   */
  async exportPage(
    ownerKeyId: number | null,
    after: { createdAt: string; code: string } | undefined,
    limit: number,
  ): Promise<Array<Link & { position: string }>> {
    const { rows } = await this.pool.query<Link & { position: string }>({
      name: 'links_export_page',
      text: `SELECT ${LINK_COLUMNS}, created_at::text AS position FROM links
             WHERE ($1::bigint IS NULL OR owner_key_id = $1)
               AND ($2::timestamptz IS NULL OR (created_at, code) < ($2::timestamptz, $3::text))
             ORDER BY created_at DESC, code DESC
             LIMIT $4`,
      values: [ownerKeyId, after?.createdAt ?? null, after?.code ?? null, limit],
    });
    return rows;
  }

  /**
   * The next page of a link's hourly visit rows for an export, in the order of their primary key,
   * after the key of the last row of the previous page.
   */
  async visitExportPage(code: string, after: VisitExportRow | undefined, limit: number): Promise<VisitExportRow[]> {
    const { rows } = await this.pool.query<VisitExportRow>({
      name: 'visits_export_page',
      text: `SELECT hour, class, referrer, browser, os, device, country, visits::bigint FROM visit_counts
             WHERE code = $1
               AND ($2::timestamptz IS NULL
                    OR (hour, class, referrer, browser, os, device, country) > ($2::timestamptz, $3::text, $4::text, $5::text, $6::text, $7::text, $9::text))
             ORDER BY hour, class, referrer, browser, os, device, country
             LIMIT $8`,
      values: [
        code,
        after?.hour ?? null,
        after?.class ?? null,
        after?.referrer ?? null,
        after?.browser ?? null,
        after?.os ?? null,
        after?.device ?? null,
        limit,
        after?.country ?? null,
      ],
    });
    return rows;
  }

  /**
   * Sets the fields that are given (undefined leaves a field as it is);
   * undefined for an unknown code. A new destination is written with the old
   * one into link_destinations, in one transaction under the link's row lock,
   * so two concurrent changes each record the destination they replaced. The
   * redirect reads original_url and rules in its own statement (no cache), so
   * the next click on any instance follows the change.
   */
  updateLink(code: string, changes: LinkChanges): Promise<AdminLink | undefined> {
    return withTransaction(this.pool, async (client) => {
      const { rows: before } = await client.query<{ original_url: string }>('SELECT original_url FROM links WHERE code = $1 FOR UPDATE', [
        code,
      ]);
      if (before.length === 0) return undefined;
      const { rows } = await client.query<AdminLink>(
        `UPDATE links SET
           expires_at = CASE WHEN $2::boolean THEN $3::timestamptz ELSE expires_at END,
           max_visits = CASE WHEN $4::boolean THEN $5::bigint ELSE max_visits END,
           disabled = COALESCE($6::boolean, disabled),
           original_url = COALESCE($7::text, original_url),
           title = CASE WHEN $8::boolean THEN $9::text ELSE title END,
           tags = COALESCE($10::text[], tags),
           rules = CASE WHEN $11::boolean THEN $12::jsonb ELSE rules END,
           password_hash = CASE WHEN $13::boolean THEN $14::text ELSE password_hash END
         WHERE code = $1
         RETURNING ${LINK_COLUMNS}`,
        [
          code,
          changes.expiresAt !== undefined,
          changes.expiresAt ?? null,
          changes.maxVisits !== undefined,
          changes.maxVisits ?? null,
          changes.disabled ?? null,
          changes.url ?? null,
          changes.title !== undefined,
          changes.title ?? null,
          changes.tags ?? null,
          changes.rules !== undefined,
          changes.rules ? JSON.stringify(changes.rules) : null,
          changes.passwordHash !== undefined,
          changes.passwordHash ?? null,
        ],
      );
      const old = before[0]!.original_url;
      if (changes.url !== undefined && changes.url !== old) {
        await client.query('INSERT INTO link_destinations (code, original_url) VALUES ($1, $2)', [code, old]);
      }
      return rows[0];
    });
  }

  /** The destinations a link had before, latest first. */
  async pastDestinations(code: string): Promise<PastDestination[]> {
    const { rows } = await this.pool.query<PastDestination>(
      'SELECT original_url, replaced_at FROM link_destinations WHERE code = $1 ORDER BY replaced_at DESC, id DESC LIMIT 100',
      [code],
    );
    return rows;
  }

  async insertApiKey(name: string, role: ApiKey['role'], keyHash: Buffer): Promise<ApiKey> {
    const { rows } = await this.pool.query<ApiKey>(
      `INSERT INTO api_keys (name, role, key_hash) VALUES ($1, $2, $3) RETURNING ${API_KEY_COLUMNS}`,
      [name, role, keyHash],
    );
    return rows[0]!;
  }

  async listApiKeys(): Promise<ApiKey[]> {
    const { rows } = await this.pool.query<ApiKey>(`SELECT ${API_KEY_COLUMNS} FROM api_keys ORDER BY id`);
    return rows;
  }

  /** Revokes a key (once; a second revoke keeps the first time); undefined for an unknown id. */
  async revokeApiKey(id: number): Promise<ApiKey | undefined> {
    const { rows } = await this.pool.query<ApiKey>(
      `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING ${API_KEY_COLUMNS}`,
      [id],
    );
    return rows[0];
  }

  /**
   * The live key with this digest, recording its use. last_used_at is written
   * at most once a minute per key, so a busy key does not rewrite its row on
   * every request.
   */
  async useApiKey(keyHash: Buffer): Promise<ApiKey | undefined> {
    const { rows } = await this.pool.query<ApiKey>({
      name: 'api_keys_use',
      text: `WITH k AS (SELECT ${API_KEY_COLUMNS} FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL),
                  touched AS (
                    UPDATE api_keys SET last_used_at = now()
                    WHERE id = (SELECT id FROM k) AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')
                  )
             SELECT * FROM k`,
      values: [keyHash],
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
               DELETE FROM links WHERE code = $1 RETURNING ${LINK_COLUMNS}
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

/** A link as the admin API shows it (the same row as everywhere else). */
export type AdminLink = Link;

/** One hourly row of a link's visits, as stored. */
export interface VisitExportRow {
  hour: Date;
  class: string;
  referrer: string;
  browser: string;
  os: string;
  device: string;
  /** '' when not known. */
  country: string;
  visits: number;
}

/** What a create sets besides the code and URL. */
export interface NewLinkFields {
  expiresAt?: Date | null;
  maxVisits?: number | null;
  manageTokenHash?: Buffer | null;
  ownerKeyId?: number | null;
  title?: string | null;
  tags?: string[];
  rules?: LinkRules | null;
  passwordHash?: string | null;
}

/** What a link's manager may change; a field left undefined keeps its value, null clears it. */
export interface LinkChanges {
  expiresAt?: Date | null;
  maxVisits?: number | null;
  disabled?: boolean;
  url?: string;
  title?: string | null;
  tags?: string[];
  rules?: LinkRules | null;
  /** A new bcrypt hash, or null to remove the password. */
  passwordHash?: string | null;
}
