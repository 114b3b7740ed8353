// PostgREST's "Perhaps you meant …" hints (Error.hs): the closest name of those it knows, when it is
// at least 75% similar. PostgREST scores with a fuzzy set whose final score is the Levenshtein
// ratio of the lower-cased names, 1 - distance / longer length; this is that score.

const MIN_SCORE = 0.75;
// Names longer than any identifier cannot be close to one; this also bounds the work per request.
const MAX_NAME_LENGTH = 128;

function levenshtein(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
}

export function similarity(a: string, b: string): number {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  const longer = Math.max(x.length, y.length);
  return longer === 0 ? 1 : 1 - levenshtein(x, y) / longer;
}

/** The candidate closest to `requested`, or null when none is close enough (or, with `inexact`, only an exact one is). */
export function closestName(requested: string, candidates: Iterable<string>, opts: { inexact?: boolean } = {}): string | null {
  if (requested.length > MAX_NAME_LENGTH) return null;
  let best: { name: string; score: number } | null = null;
  for (const name of candidates) {
    if (name.length > MAX_NAME_LENGTH) continue;
    const score = similarity(requested, name);
    if (opts.inexact && score >= 1) continue;
    if (score >= MIN_SCORE && (best === null || score > best.score)) best = { name, score };
  }
  return best?.name ?? null;
}

/** `Perhaps you meant the table 'public.notes'`, or null when no name is close enough. */
export function tableNotFoundHint(schema: string, requested: string, tables: Iterable<string>): string | null {
  const best = closestName(requested, tables);
  return best === null ? null : `Perhaps you meant the table '${schema}.${best}'`;
}
