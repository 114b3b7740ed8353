import { createRequire } from 'node:module';
import type * as GeoipCountry from 'geoip-country';

// The visitor's country, looked up in this process from MaxMind's GeoLite2 Country data as
// the geoip-country package ships it (CC BY-SA 4.0, see docs/shortener.md). The package reads
// its two data files (about 8 MB) synchronously when it is first required; this module requires
// it when the service starts, so no request ever waits for the files. A lookup is a binary
// search in memory: no database round trip and no I/O on the redirect path. Private, loopback,
// link-local and shared (CGNAT) ranges are in no country of the data, so they give null.
const geoip: typeof GeoipCountry = createRequire(import.meta.url)('geoip-country');

const ALPHA_2 = /^[A-Z]{2}$/;

/**
 * ISO 3166-1 alpha-2 code of the address's country (IPv4, IPv6 or IPv4-mapped IPv6, as
 * request.ip gives it); null for an address the data does not place, or text that is not an
 * address.
 */
export function countryOf(ip: string | undefined): string | null {
  if (ip === undefined) return null;
  const country = geoip.lookup(ip)?.country;
  return country !== undefined && ALPHA_2.test(country) ? country : null;
}
