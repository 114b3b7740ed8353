import { domainToASCII } from 'node:url';
import { badRequest } from '../kit/http/errors.js';
import { isStorableText } from '../kit/text.js';

// The destinations a link may lead to: a link's own URL and every URL of its device rules pass
// the same checks (links.ts, link-rules.ts).

export const MAX_URL_LENGTH = 2048;
const ALLOWED_PROTOCOLS = new Set(['http:', 'https:']);

// What the WHATWG parser strips from both ends before parsing: C0 controls and space.
const SURROUNDING = /^[\u0000-\u0020]+|[\u0000-\u0020]+$/g;
// The authority as RFC 3986 (and a person) reads it: after "scheme://", up to the first / ? or #.
const SCHEME_AND_AUTHORITY = /^[a-zA-Z][a-zA-Z0-9+.-]*:\/\/([^/?#]*)/;
const PORT = /:\d*$/;
const IPV4 = /^\d+\.\d+\.\d+\.\d+$/;
const ASCII = /^[\x00-\x7f]*$/;

/**
 * Whether the host written in the URL is the host the redirect reaches. The
 * parser may only change its spelling in ways every browser shows and resolves
 * alike: case, an IDN's punycode, IPv6 compression. Percent-escapes and the
 * legacy numeric IPv4 forms (0x7f.1, 2130706433, 010.0.0.1 read as octal) are
 * refused: a reader cannot tell where they go.
 */
function hostReadsAsReached(written: string, reached: string): boolean {
  if (written.toLowerCase() === reached) return true;
  if (written.startsWith('[')) return reached.startsWith('[');
  if (ASCII.test(written) || written.includes('%')) return false;
  return domainToASCII(written) === reached && !IPV4.test(reached);
}

/**
 * Rule 1 beyond what the schema checks: the text parses as a URL with an
 * allowed protocol, and it goes where it reads. original_url is shown as
 * submitted (create, stats) while the redirect goes to the parser's form, so
 * whatever would make the two disagree on the host or the path is refused:
 * credentials before the host (https://good.com@evil.com/), a backslash
 * before the query (read as "/": http://evil.com\@good.com/ goes to
 * evil.com), tabs and line breaks (deleted by the parser), a missing "//",
 * and hosts the parser rewrites beyond case, IDN and IPv6 compression.
 */
export function validateTargetUrl(raw: string): void {
  // Text that parses as a URL but cannot be stored as given: U+0000 made the insert fail with a
  // 500, and a lone surrogate would come back as U+FFFD, a different URL from the one submitted.
  if (!isStorableText(raw)) throw badRequest('url must not contain U+0000 or unpaired surrogates');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badRequest('url must be a valid absolute URL');
  }
  if (!ALLOWED_PROTOCOLS.has(url.protocol)) {
    throw badRequest(`url protocol "${url.protocol}" is not allowed: only http and https`);
  }
  const text = raw.replace(SURROUNDING, '');
  if (/[\t\n\r]/.test(text)) {
    throw badRequest('url must not contain tabs or line breaks: browsers delete them, so the link would not go where it reads');
  }
  if (text.split(/[?#]/, 1)[0]!.includes('\\')) {
    throw badRequest('url must not contain a backslash before the query: browsers read it as "/", so the link would not go where it reads');
  }
  const authority = SCHEME_AND_AUTHORITY.exec(text)?.[1];
  if (!authority) throw badRequest('url must start with http:// or https:// followed by the host');
  if (authority.includes('@') || url.username !== '' || url.password !== '') {
    throw badRequest('url must not contain credentials (user:password@ before the host): the link would show one host and go to another');
  }
  if (!hostReadsAsReached(authority.replace(PORT, ''), url.hostname)) {
    throw badRequest('url host must be written as it is reached: no percent-escapes and no numeric IPv4 forms other than a.b.c.d');
  }
}

/**
 * Whether `raw` points into this service itself (BASE_URL's host and port, any
 * path under BASE_URL's path, either scheme): shortening a short link again
 * only makes a chain of redirects, each counting a click and each able to die.
 */
export function isOwnShortLink(raw: string, baseUrl: string): boolean {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return false;
  }
  const own = new URL(baseUrl);
  if (url.hostname !== own.hostname || url.port !== own.port) return false;
  const basePath = own.pathname.replace(/\/+$/, '');
  return url.pathname === basePath || url.pathname.startsWith(`${basePath}/`);
}

export const OWN_SHORT_LINK =
  'url is a link of this shortener already: shorten the address it leads to, so visitors are not sent through two redirects';
