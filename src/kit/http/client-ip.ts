import ipaddr from 'ipaddr.js';

// A client address as a rate-limit key. The same client can arrive spelled
// many ways (`::ffff:198.51.100.7` from a dual-stack socket, upper-case or
// zero-padded IPv6 and IPv4 from an X-Forwarded-For header), and an IPv6
// client usually holds a whole /64: keyed by raw text, each spelling and each
// address of the /64 would get a fresh window.
//
// Usage, in any limiter keyed by client address:
//
//   limiter.consume(rateLimitKey(request.ip, config.RATE_LIMIT_IPV6_PREFIX))
//
// The key is a plain string: `198.51.100.7` for IPv4 (and IPv4-mapped IPv6),
// `2001:db8:2::/64` for IPv6, `unparseable` for anything else. Nothing here throws.

/** How many leading bits of an IPv6 address identify one client (one customer's /64). */
export const DEFAULT_IPV6_PREFIX = 64;

/**
 * The wider IPv6 network also limited: a site is usually given a /48 (or a /56), that is 65,536
 * (or 256) /64s, and a client rotating through them would get a fresh /64 window each time.
 */
export const DEFAULT_IPV6_WIDE_PREFIX = 48;

/** How many times a limit per client a wide IPv6 network may use: room for a site's many clients, none for 65,536 fresh ones. */
export const IPV6_WIDE_FACTOR = 16;

/** The key shared by every request whose address does not parse: such clients are limited together. */
export const UNPARSEABLE_KEY = 'unparseable';

// Longer than any spelling of an address with a zone and a port: not worth parsing.
const MAX_ADDRESS_LENGTH = 100;

// Four decimal parts. Leading zeros are read as decimal (198.051.100.007 is
// 198.51.100.7), as a person and the Go and Python parsers read it, not as the
// octal of inet_aton and ipaddr.parse (which would give 198.41.100.7). Hex
// parts and the short forms (3325256711, 198.51.25607) are not accepted: no
// proxy writes them, so they can only be forged text.
const DOTTED_DECIMAL = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;
const IPV4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/;
const BRACKETED_IPV6 = /^\[([^\]]+)\](?::\d{1,5})?$/;
// An IPv6 address written with its last 32 bits in dotted form (::ffff:198.51.100.7).
const IPV6_WITH_DOTTED_TAIL = /^(.*:)(\d{1,3}(?:\.\d{1,3}){3})$/;

function parseIPv4(text: string): ipaddr.IPv4 | undefined {
  const match = DOTTED_DECIMAL.exec(text);
  if (!match) return undefined;
  const octets = match.slice(1).map(Number);
  if (octets.some((o) => o > 255)) return undefined;
  return new ipaddr.IPv4(octets);
}

function parseIPv6(text: string): ipaddr.IPv6 | undefined {
  // A zone (fe80::1%eth0) names the interface of this machine, not the client.
  let hex = text.replace(/%[0-9a-z._~-]+$/i, '');
  // ipaddr.js reads the dotted tail in octal or hex and turns ::198.51.100.7
  // (IPv4-compatible, not mapped) into ::ffff:198.51.100.7; so the tail is
  // read here, in decimal like any IPv4 address, and written as two hex groups.
  const tail = IPV6_WITH_DOTTED_TAIL.exec(hex);
  if (tail) {
    const v4 = parseIPv4(tail[2]!);
    if (!v4) return undefined;
    const [a, b, c, d] = v4.octets as [number, number, number, number];
    hex = `${tail[1]}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  if (!/^[0-9a-f:]+$/i.test(hex) || !ipaddr.IPv6.isValid(hex)) return undefined;
  return ipaddr.IPv6.parse(hex);
}

function parse(ip: string | undefined): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  if (typeof ip !== 'string' || ip.length === 0 || ip.length > MAX_ADDRESS_LENGTH) return undefined;
  const text = ip.trim();
  // Some proxies write the client's port too: 198.51.100.7:4711, [2001:db8::1]:4711.
  const withPort = IPV4_WITH_PORT.exec(text);
  if (withPort) return parseIPv4(withPort[1]!);
  const bracketed = BRACKETED_IPV6.exec(text);
  if (bracketed) return parseIPv6(bracketed[1]!);
  if (text.includes(':')) return parseIPv6(text);
  return parseIPv4(text);
}

/**
 * The one spelling of a client address: IPv4 in dotted decimal without
 * leading zeros (IPv4-mapped IPv6 becomes its IPv4 address), IPv6 in the
 * compressed lower-case form of RFC 5952 without zone. Undefined when the
 * text is not an address (never throws).
 */
export function canonicalIp(ip: string | undefined): string | undefined {
  const address = parse(ip);
  if (address === undefined) return undefined;
  if (address instanceof ipaddr.IPv6) {
    return address.isIPv4MappedAddress() ? address.toIPv4Address().toString() : address.toRFC5952String();
  }
  return address.toString();
}

/**
 * The rate-limit key of a client address (pass `request.ip`): the canonical
 * IPv4 address, or the IPv6 network of the first `ipv6Prefix` bits (default
 * 64) written as `network/prefix`, so every address a client holds in its
 * /64 shares one window. Every unparseable address shares the single key
 * `unparseable`: failing closed, since only a trusted proxy's
 * X-Forwarded-For can deliver one. Never throws.
 */
export function rateLimitKey(ip: string | undefined, ipv6Prefix: number = DEFAULT_IPV6_PREFIX): string {
  const address = parse(ip);
  if (address === undefined) return UNPARSEABLE_KEY;
  if (address instanceof ipaddr.IPv4) return address.toString();
  if (address.isIPv4MappedAddress()) return address.toIPv4Address().toString();
  const prefix = Number.isInteger(ipv6Prefix) && ipv6Prefix >= 1 && ipv6Prefix <= 128 ? ipv6Prefix : DEFAULT_IPV6_PREFIX;
  const parts = address.parts.map((part, i) => {
    const bitsKept = Math.min(Math.max(prefix - i * 16, 0), 16);
    return part & ((0xffff << (16 - bitsKept)) & 0xffff);
  });
  return `${new ipaddr.IPv6(parts).toRFC5952String()}/${prefix}`;
}

/** How IPv6 clients are grouped: the client's own network, and the wider one also limited (at most as long as `prefix`). */
export interface Ipv6Prefixes {
  prefix: number;
  widePrefix: number;
}

/**
 * The rate-limit keys of a client address at every level it is limited at: `[key]` for IPv4 (and
 * anything unparseable), `[its /64 key, its /48 key]` for IPv6 (the configured prefixes). A limit
 * counts on each; the wide key's maximum is IPV6_WIDE_FACTOR times the client's. Never throws.
 */
export function rateLimitKeys(ip: string | undefined, prefixes: Ipv6Prefixes): string[] {
  const narrow = rateLimitKey(ip, prefixes.prefix);
  if (!narrow.includes('/') || prefixes.widePrefix >= prefixes.prefix) return [narrow];
  return [narrow, rateLimitKey(ip, prefixes.widePrefix)];
}
