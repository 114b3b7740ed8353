// ISO 8601 as the API accepts it: a calendar date, optionally a time with an
// explicit offset (Z or ±hh:mm). Date.parse alone accepts far more (local
// times without an offset, "2026-02-30" rolled over to March), so the text is
// matched first and the calendar date checked.

/** The last instant the API takes and shows: a later one has no four-digit year in ISO 8601. */
const LAST_INSTANT = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

const ISO_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/;

/**
 * Milliseconds since the epoch, or undefined when the text is not a date
 * (taken as UTC midnight, only when dateOnly is allowed) or a timestamp with
 * an offset between the years 1970 and 9999, in UTC too (9999-12-31T23:59:59-01:00 is in 10000).
 */
export function parseIsoTimestamp(text: string, opts: { dateOnly: boolean }): number | undefined {
  const m = ISO_TIMESTAMP.exec(text);
  if (!m) return undefined;
  const [, year, month, day, hour, minute, second, offset] = m;
  if (hour === undefined && !opts.dateOnly) return undefined;
  const date = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  if (date.getUTCDate() !== Number(day) || date.getUTCMonth() !== Number(month) - 1) return undefined;
  if (hour !== undefined && (Number(hour) > 23 || Number(minute) > 59 || Number(second ?? 0) > 59)) return undefined;
  if (offset !== undefined && offset !== 'Z' && (Number(offset.slice(1, 3)) > 23 || Number(offset.slice(-2)) > 59)) return undefined;
  const ms =
    hour === undefined
      ? date.getTime()
      : Date.parse(offset!.length === 5 ? `${text.slice(0, -5)}${offset!.slice(0, 3)}:${offset!.slice(3)}` : text);
  if (!Number.isFinite(ms) || ms < 0 || ms > LAST_INSTANT) return undefined;
  return ms;
}
