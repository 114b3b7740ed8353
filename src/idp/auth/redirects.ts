// Where a mail's link may send the browser after /verify (GoTrue's utilities.GetReferrer and
// IsRedirectURLValid, made strict). A redirect_to is first parsed as a URL; one holding a backslash,
// user-info, whitespace or a control character is refused outright, since browsers and parsers
// disagree about where such a URL leads. What is left is allowed when its whole origin (scheme,
// host, port) is the app URL's, or when it matches one of the additional redirect URLs part by
// part: scheme, host label by label, port, then path. The link then leads to exactly the
// normalised URL that was checked. Anything else falls back to the app URL, so a link can never be
// made to deliver a session to someone else's site.

/** One entry of the allow list, split into the parts a URL is matched on. */
interface RedirectPattern {
  scheme: 'http:' | 'https:';
  /** Host labels, lower case: `*` is one label, `**` one or more labels, other `*` within a label. */
  labels: string[];
  /** `*`: any port; '' the scheme's default. */
  port: string;
  /** The path as a regular expression: `*` within one segment, `**` across segments. */
  path: RegExp;
}

const PATTERN = /^(https?):\/\/([A-Za-z0-9*.-]+)(?::(\d+|\*))?(\/[^?#]*)?$/;

/** Parses an allow-list entry; undefined for one that cannot match anything safely. */
function parsePattern(raw: string): RedirectPattern | undefined {
  const match = PATTERN.exec(raw.trim());
  if (!match) return undefined;
  const [, scheme, host, port = '', path = '/'] = match;
  const labels = host!.toLowerCase().split('.');
  if (labels.some((label) => label === '')) return undefined;
  const defaultPort = scheme === 'https' ? '443' : '80';
  return {
    scheme: `${scheme}:` as 'http:' | 'https:',
    labels,
    port: port === defaultPort ? '' : port,
    path: new RegExp(`^${globToRegExp(path, '[^/]')}$`),
  };
}

/** A glob as a regular expression source: `**` any characters, `*` and `?` any but `notAcross`'s. */
function globToRegExp(glob: string, one: string): string {
  let source = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*' && glob[i + 1] === '*') {
      source += '.*';
      i++;
    } else if (c === '*') {
      source += `${one}*`;
    } else if (c === '?') {
      source += one;
    } else {
      source += c.replace(/[\\^$.|+()[\]{}]/g, '\\$&');
    }
  }
  return source;
}

/** Whether one host label matches one pattern label (`*` within it matches letters, digits, `-`). */
function labelMatches(pattern: string, label: string): boolean {
  if (pattern === '*') return label !== '';
  if (!pattern.includes('*')) return pattern === label;
  return new RegExp(`^${globToRegExp(pattern, '[a-z0-9-]')}$`).test(label);
}

/** Host labels against pattern labels; `**` takes one or more whole labels, never a `/` or `:`. */
function hostMatches(patterns: readonly string[], labels: readonly string[]): boolean {
  if (patterns.length === 0) return labels.length === 0;
  const [first, ...rest] = patterns;
  if (first === '**') {
    for (let taken = 1; taken <= labels.length - rest.length; taken++) {
      if (hostMatches(rest, labels.slice(taken))) return true;
    }
    return false;
  }
  return labels.length > 0 && labelMatches(first!, labels[0]!) && hostMatches(rest, labels.slice(1));
}

/**
 * A redirect_to parsed, or undefined when it is not a plain absolute http(s) URL: a backslash,
 * user-info, whitespace or a control character (raw or percent-encoded in the host) refuses it.
 */
function parseRequested(requested: string): URL | undefined {
  if (/[\\\u0000-\u0020\u007f-\u009f]/.test(requested)) return undefined;
  let url: URL;
  try {
    url = new URL(requested);
  } catch {
    return undefined;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return undefined;
  if (url.username !== '' || url.password !== '') return undefined;
  if (!/^[a-z0-9.-]+$|^\[[0-9a-f:.]+\]$/.test(url.hostname)) return undefined;
  return url;
}

export class RedirectPolicy {
  private readonly siteOrigin: string;
  private readonly allowed: RedirectPattern[];

  /** `siteUrl`: the default target; `allowList`: the additional redirect URLs (globs). */
  constructor(
    readonly siteUrl: string,
    allowList: readonly string[],
  ) {
    this.siteOrigin = new URL(siteUrl).origin;
    this.allowed = allowList.map(parsePattern).filter((pattern) => pattern !== undefined);
  }

  /** The normalised redirect_to when it is allowed, else the site URL. */
  resolve(requested: string | undefined): string {
    const url = requested ? this.allowedUrl(requested) : undefined;
    return url ?? this.siteUrl;
  }

  isAllowed(requested: string): boolean {
    return this.allowedUrl(requested) !== undefined;
  }

  /** The URL the browser will be sent to (exactly what was checked), or undefined. */
  private allowedUrl(requested: string): string | undefined {
    const url = parseRequested(requested);
    if (!url) return undefined;
    if (url.origin === this.siteOrigin) return url.href;
    const labels = url.hostname.split('.');
    const ok = this.allowed.some(
      (pattern) =>
        pattern.scheme === url.protocol &&
        (pattern.port === '*' || pattern.port === url.port) &&
        hostMatches(pattern.labels, labels) &&
        pattern.path.test(url.pathname),
    );
    return ok ? url.href : undefined;
  }
}
