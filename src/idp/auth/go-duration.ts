import { authErrors } from './errors.js';

// Go's time.ParseDuration, which GoTrue uses for `ban_duration`: a sequence of decimal numbers, each
// with a unit (ns, us, µs, ms, s, m, h), e.g. "24h", "1h30m", "1.5s", "-2m". Its error texts are
// Go's, so a client sees the same message as from GoTrue.

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
/** Go's time.Duration is int64 nanoseconds: about 292 years. */
const MAX_DURATION_MS = 9_223_372_036_854;

const quote = (value: string) => JSON.stringify(value);

/** Milliseconds, or GoTrue's 400 "invalid format for ban duration: time: …". */
export function parseBanDuration(text: string): number {
  const fail = (reason: string) => authErrors.validation(`invalid format for ban duration: time: ${reason}`);
  const invalid = () => fail(`invalid duration ${quote(text)}`);
  let rest = text;
  let sign = 1;
  if (rest.startsWith('-') || rest.startsWith('+')) {
    sign = rest.startsWith('-') ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest === '0') return 0;
  if (rest === '') throw invalid();
  let total = 0;
  while (rest !== '') {
    const number = /^(\d*)(?:\.(\d*))?/.exec(rest)!;
    const [matched, whole = '', fraction = ''] = number;
    if (whole === '' && fraction === '') throw invalid();
    rest = rest.slice(matched.length);
    const unit = /^[^\d.]*/.exec(rest)![0];
    if (unit === '') throw fail(`missing unit in duration ${quote(text)}`);
    const scale = UNIT_MS[unit];
    if (scale === undefined) throw fail(`unknown unit ${quote(unit)} in duration ${quote(text)}`);
    rest = rest.slice(unit.length);
    total += Number(`${whole || '0'}.${fraction || '0'}`) * scale;
    if (total > MAX_DURATION_MS) throw invalid();
  }
  return sign * total;
}
