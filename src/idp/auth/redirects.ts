// Where a mail's link may send the browser after /verify: GoTrue's rule (utilities.GetReferrer and
// IsRedirectURLValid). A redirect_to on the site URL's host, or matching one of the configured
// additional redirect URLs, is kept; anything else falls back to the site URL, so a link can never
// be made to deliver a session to someone else's site.

/**
 * A pattern of the allow list as GoTrue matches it (a glob with `.` and `/` as separators): `*`
 * matches within one host label or path segment, `**` across them, `?` one character; a pattern
 * without wildcards matches exactly that URL.
 */
function globToRegExp(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*' && pattern[i + 1] === '*') {
      source += '.*';
      i++;
    } else if (c === '*') {
      source += '[^./]*';
    } else if (c === '?') {
      source += '[^./]';
    } else {
      source += c.replace(/[\\^$.|+()[\]{}]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}$`);
}

export class RedirectPolicy {
  private readonly siteHost: string;
  private readonly allowed: RegExp[];

  /** `siteUrl`: the default target; `allowList`: the additional redirect URLs (globs). */
  constructor(
    readonly siteUrl: string,
    allowList: readonly string[],
  ) {
    this.siteHost = new URL(siteUrl).hostname;
    this.allowed = allowList.map(globToRegExp);
  }

  /** The redirect_to when it is allowed, else the site URL. */
  resolve(requested: string | undefined): string {
    if (requested && this.isAllowed(requested)) return requested;
    return this.siteUrl;
  }

  isAllowed(requested: string): boolean {
    let url: URL;
    try {
      url = new URL(requested);
    } catch {
      return false;
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
    // GoTrue accepts any URL on the site URL's host.
    if (url.hostname === this.siteHost) return true;
    // Matched without the fragment and query, as GoTrue does.
    const bare = `${url.protocol}//${url.host}${url.pathname}`;
    return this.allowed.some((pattern) => pattern.test(bare) || pattern.test(requested));
  }
}
