import proxyAddr from '@fastify/proxy-addr';

// Fastify asks whether an address is a trusted proxy for every address of a
// request's chain (the socket's, then X-Forwarded-For's), each time request.ip
// is read. Its own check (proxy-addr) parses each address with ipaddr.js; when
// TRUST_PROXY names only IPv4 addresses and ranges, a plain dotted IPv4 address
// (or its IPv4-mapped form `::ffff:a.b.c.d`, as a dual-stack socket reports it)
// is checked here with integer masks instead. Anything else (IPv6, leading
// zeros, other spellings, or any IPv6 or named entry in the list) goes to
// proxy-addr's check as before, so every answer is the one proxy-addr gives.

/** Fastify's `trustProxy` option: `(address, hop) => trusted`. */
export type TrustFunction = (address: string, hop: number) => boolean;

// Parts written as ipaddr.js reads them as decimal: no leading zero (010 is octal to it).
const PLAIN_IPV4 = /^(?:::ffff:)?(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})$/;
const PLAIN_IPV4_RANGE = /^(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})\.(0|[1-9]\d{0,2})(?:\/(0|[1-9]\d?))?$/;

/** The 32-bit value of a plain dotted IPv4 address (optionally `::ffff:`-mapped), or -1. */
export function plainIPv4Value(address: string): number {
  const match = PLAIN_IPV4.exec(address);
  if (!match) return -1;
  let value = 0;
  for (let i = 1; i <= 4; i++) {
    const part = Number(match[i]);
    if (part > 255) return -1;
    value = value * 256 + part;
  }
  return value;
}

/** [network, mask] of each entry, or undefined when any entry is not a plain IPv4 address or range. */
function plainIPv4Ranges(list: string[]): Array<[number, number]> | undefined {
  const ranges: Array<[number, number]> = [];
  for (const entry of list) {
    const match = PLAIN_IPV4_RANGE.exec(entry);
    if (!match) return undefined;
    const bits = match[5] === undefined ? 32 : Number(match[5]);
    if (bits > 32) return undefined;
    const address = plainIPv4Value(entry.split('/')[0]!);
    if (address < 0) return undefined;
    // Unsigned arithmetic: >>> 0 keeps a mask of 32 ones positive.
    const mask = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
    ranges.push([(address & mask) >>> 0, mask]);
  }
  return ranges;
}

/**
 * The trust check for TRUST_PROXY's list (addresses, CIDRs, or the names proxy-addr knows):
 * proxy-addr's own, with plain IPv4 addresses answered without parsing when the list is all IPv4.
 * Throws on a list proxy-addr refuses, as Fastify would.
 */
export function trustedProxy(list: string[]): TrustFunction {
  const compiled = proxyAddr.compile(list) as TrustFunction;
  const ranges = plainIPv4Ranges(list);
  if (ranges === undefined) return compiled;
  return (address, hop) => {
    const value = typeof address === 'string' ? plainIPv4Value(address) : -1;
    if (value < 0) return compiled(address, hop);
    for (const [network, mask] of ranges) if ((value & mask) >>> 0 === network) return true;
    return false;
  };
}
