// Codes that are never issued because a path of the service has, or will have,
// the same first segment: a short link there would shadow the page, or the page
// the link. The app's own GET routes (healthz, metrics, …) are refused as they
// are registered (app.hasRoute); these are the first segments of what the
// service serves besides them, including the web UI it is to serve: /admin,
// /stats/<code>, /assets/…, plus /api and /docs. A code is 7 characters, so it
// is refused when it starts with one of them, in any case: `admin12`,
// `Assets1` and `STATS99` are all kept free for those pages and never read as
// one of them in a shared link.
export const RESERVED_CODE_PREFIXES = ['admin', 'api', 'assets', 'docs', 'healthz', 'metrics', 'readyz', 'stats'] as const;

/**
 * Chosen codes equal to a fixed path under /api/links/: GET /api/links/export would shadow the
 * stats of a link coded `export`. Exact and case-sensitive, as the router is.
 */
export const RESERVED_CODES = ['bulk', 'export'] as const;

export function isReservedCode(code: string): boolean {
  if ((RESERVED_CODES as readonly string[]).includes(code)) return true;
  const lower = code.toLowerCase();
  return RESERVED_CODE_PREFIXES.some((prefix) => lower.startsWith(prefix));
}
