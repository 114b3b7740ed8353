import { badRequest } from '../kit/http/errors.js';
import type { LinkRepository, VisitRow } from './repository.js';
import { parseIsoTimestamp } from './timestamps.js';
import { DAY_MS, HOUR_MS, utcDay } from './visits.js';

export type Interval = 'hour' | 'day';

const STEP_MS: Record<Interval, number> = { hour: HOUR_MS, day: DAY_MS };
/** The longest range each interval answers (hour: 744 buckets, day: 366 or 367). */
const MAX_RANGE_DAYS: Record<Interval, number> = { hour: 31, day: 366 };
const DEFAULT_RANGE_MS = 30 * DAY_MS;

export interface VisitQuery {
  from?: string;
  to?: string;
  interval?: string;
}

export interface VisitRange {
  from: number;
  to: number;
  interval: Interval;
}

export interface NamedCount {
  name: string;
  visits: number;
}

export interface VisitReport {
  from: string;
  to: string;
  interval: Interval;
  totals: { visits: number; humans: number; bots: number; previews: number; unique_visitors: number };
  series: Array<{ start: string; visits: number; humans: number }>;
  referrers: NamedCount[];
  browsers: NamedCount[];
  operating_systems: NamedCount[];
  devices: NamedCount[];
  /** ISO 3166-1 alpha-2 codes; null for visits whose country is not known. */
  countries: Array<{ name: string | null; visits: number }>;
}

function timestamp(name: 'from' | 'to', text: string): number {
  const ms = parseIsoTimestamp(text, { dateOnly: true });
  if (ms === undefined) {
    throw badRequest(`${name} must be an ISO 8601 date or timestamp with an offset, e.g. 2026-11-01 or 2026-11-01T00:00:00Z`);
  }
  return ms;
}

/**
 * A UTC day as PostgreSQL reads a date. Not toISOString: the day after
 * 9999-12-31 (the end of a range whose `to` is in that day) is written
 * `+010000-01-01` there, which PostgreSQL refuses; it reads `10000-01-01`.
 */
function sqlDay(ms: number): string {
  const day = new Date(utcDay(ms));
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${String(day.getUTCFullYear()).padStart(4, '0')}-${pad(day.getUTCMonth() + 1)}-${pad(day.getUTCDate())}`;
}

/** Validates the query: defaults to = now, from = 30 days earlier, interval = day. */
export function parseVisitQuery(query: VisitQuery, now: number): VisitRange {
  const interval = query.interval ?? 'day';
  if (interval !== 'hour' && interval !== 'day') throw badRequest('interval must be "hour" or "day"');
  const to = query.to === undefined ? now : timestamp('to', query.to);
  const from = query.from === undefined ? to - DEFAULT_RANGE_MS : timestamp('from', query.from);
  if (from >= to) throw badRequest('from must be earlier than to');
  const maxDays = MAX_RANGE_DAYS[interval];
  if (to - from > maxDays * DAY_MS) {
    throw badRequest(`from and to are more than ${maxDays} days apart, the longest range for interval=${interval}`);
  }
  return { from, to, interval };
}

/**
 * The buckets are UTC hours or days: the first starts at `from` rounded down
 * to its interval, the last is the one holding the instant before `to`. Visits
 * are stored per hour, so a bucket counts the hours that start in [first
 * bucket, to). Unique visitors are the sum over the UTC days the range
 * touches of each day's distinct visitors. Days already rolled up are read
 * from their daily rows (migration 005): the same figures, fewer rows.
 */
export async function visitReport(repo: LinkRepository, code: string, range: VisitRange): Promise<VisitReport> {
  const step = STEP_MS[range.interval];
  const first = Math.floor(range.from / step) * step;
  const rows = await repo.visitRows(
    code,
    new Date(first),
    new Date(range.to),
    step / 1000,
    sqlDay(range.from),
    sqlDay(utcDay(range.to - 1) + DAY_MS),
    // Day buckets before the day holding `to` are whole days, which the daily rollups can answer.
    new Date(range.interval === 'day' ? utcDay(range.to) : first),
  );

  const buckets = new Map<number, { visits: number; humans: number }>();
  const totals = { visits: 0, humans: 0, bots: 0, previews: 0, unique_visitors: 0 };
  const tops: Record<'referrers' | 'browsers' | 'operating_systems' | 'devices' | 'countries', NamedCount[]> = {
    referrers: [],
    browsers: [],
    operating_systems: [],
    devices: [],
    countries: [],
  };
  for (const row of rows as VisitRow[]) {
    if (row.kind === 'unique') totals.unique_visitors = row.visits;
    else if (row.kind === 'series') {
      const start = row.position * step;
      const bucket = buckets.get(start) ?? { visits: 0, humans: 0 };
      bucket.visits += row.visits;
      totals.visits += row.visits;
      if (row.name === 'human') {
        bucket.humans += row.visits;
        totals.humans += row.visits;
      } else if (row.name === 'bot') totals.bots += row.visits;
      else totals.previews += row.visits;
      buckets.set(start, bucket);
    } else tops[row.kind][row.position - 1] = { name: row.name, visits: row.visits };
  }

  const series: VisitReport['series'] = [];
  for (let start = first; start < range.to; start += step) {
    const bucket = buckets.get(start) ?? { visits: 0, humans: 0 };
    series.push({ start: new Date(start).toISOString(), ...bucket });
  }
  return {
    from: new Date(range.from).toISOString(),
    to: new Date(range.to).toISOString(),
    interval: range.interval,
    totals,
    series,
    ...tops,
    // Stored as '' (a key column), shown as null: not known.
    countries: tops.countries.map(({ name, visits }) => ({ name: name === '' ? null : name, visits })),
  };
}
