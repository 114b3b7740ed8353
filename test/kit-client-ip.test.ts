import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { canonicalIp, rateLimitKey, UNPARSEABLE_KEY } from '../src/kit/client-ip.js';
import { loadConfig, commonVars, ConfigErrors } from '../src/kit/config.js';

describe('canonicalIp', () => {
  it('gives every spelling of one IPv4 client the same address', () => {
    for (const spelling of [
      '198.51.100.7',
      '::ffff:198.51.100.7',
      '::FFFF:198.51.100.7',
      '::ffff:c633:6407',
      '0:0:0:0:0:ffff:c633:6407',
      '[::ffff:198.51.100.7]',
      '198.051.100.007',
      '198.51.100.7:4711',
      ' 198.51.100.7 ',
    ]) {
      assert.equal(canonicalIp(spelling), '198.51.100.7', spelling);
    }
  });

  it('reads zero-padded IPv4 parts as decimal, not as the octal of inet_aton', () => {
    // inet_aton and ipaddr.parse read 051 as octal 41; a person, Go and Python read 51.
    assert.equal(canonicalIp('198.051.100.007'), '198.51.100.7');
    assert.equal(canonicalIp('010.000.000.001'), '10.0.0.1');
    assert.equal(canonicalIp('::ffff:010.0.0.1'), '10.0.0.1');
  });

  it('writes IPv6 compressed and in lower case (RFC 5952), without zone or port', () => {
    const spellings = ['2001:DB8:2::1', '2001:0db8:0002::0001', '2001:db8:2:0:0:0:0:1', '[2001:db8:2::1]', '[2001:db8:2::1]:443', '2001:db8:2::1%eth0'];
    for (const spelling of spellings) {
      assert.equal(canonicalIp(spelling), '2001:db8:2::1', spelling);
    }
    assert.equal(canonicalIp('::'), '::');
    assert.equal(canonicalIp('::1'), '::1');
    // IPv4-compatible (deprecated), not IPv4-mapped: it stays an IPv6 address.
    assert.equal(canonicalIp('::198.51.100.7'), '::c633:6407');
  });

  it('returns undefined, never throws, for anything that is not an address', () => {
    for (const text of [
      '',
      'garbage',
      'unknown',
      '256.1.1.1',
      '1.2.3',
      '1.2.3.4.5',
      '0xc6.0x33.0x64.7', // hex parts: only forged text looks like this
      '3325256711', // the whole address as one number
      '198.51.25607',
      '1:2:3:4:5:6:7:8:9',
      '2001:db8::1::2',
      '::ffff:256.0.0.1',
      '::ffff:0x7f.0.0.1',
      '[2001:db8::1',
      '2001:db8::g',
      '1.2.3.4, 5.6.7.8',
      'a'.repeat(10_000),
      '\u0000',
    ]) {
      assert.equal(canonicalIp(text), undefined, JSON.stringify(text.slice(0, 40)));
    }
    assert.equal(canonicalIp(undefined), undefined);
    assert.equal(canonicalIp(42 as unknown as string), undefined);
  });

  it('never throws on any string (property)', () => {
    const addressish = fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEFx.:[]%/ ,-'), maxLength: 60 });
    fc.assert(
      fc.property(fc.oneof(fc.string(), addressish), (text) => {
        const canonical = canonicalIp(text);
        const key = rateLimitKey(text);
        if (canonical === undefined) assert.equal(key, UNPARSEABLE_KEY);
        // The canonical form is a fixed point.
        else assert.equal(canonicalIp(canonical), canonical);
      }),
      { numRuns: 2000 },
    );
  });

  it('agrees with the WHATWG URL parser on every IPv6 address', () => {
    fc.assert(
      fc.property(fc.ipV6(), (ip) => {
        const whatwg = new URL(`http://[${ip}]/`).hostname.slice(1, -1);
        const canonical = canonicalIp(ip);
        // The WHATWG form keeps IPv4-mapped addresses in IPv6; ours is their IPv4 address.
        if (/^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/.test(whatwg)) assert.equal(canonicalIp(canonical), canonical);
        else assert.equal(canonical, whatwg, ip);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('rateLimitKey', () => {
  it('keys IPv4 clients (and IPv4-mapped IPv6) by the address', () => {
    assert.equal(rateLimitKey('198.51.100.7'), '198.51.100.7');
    assert.equal(rateLimitKey('::ffff:198.51.100.7'), '198.51.100.7');
    assert.equal(rateLimitKey('198.051.100.007', 48), '198.51.100.7');
  });

  it('keys IPv6 clients by their /64 by default', () => {
    assert.equal(rateLimitKey('2001:db8:2::1'), '2001:db8:2::/64');
    assert.equal(rateLimitKey('2001:DB8:2:0:ffff:ffff:ffff:ffff'), '2001:db8:2::/64');
    assert.equal(rateLimitKey('2001:0db8:0002:0000:1234::1'), '2001:db8:2::/64');
    assert.equal(rateLimitKey('2001:db8:2:1::1'), '2001:db8:2:1::/64');
  });

  it('takes the prefix length as configured', () => {
    assert.equal(rateLimitKey('2001:db8:2:1::1', 48), '2001:db8:2::/48');
    assert.equal(rateLimitKey('2001:db8:2:1::1', 56), '2001:db8:2::/56');
    assert.equal(rateLimitKey('2001:db8:2:1ff::1', 56), '2001:db8:2:100::/56');
    assert.equal(rateLimitKey('2001:db8:2:1::1', 128), '2001:db8:2:1::1/128');
    assert.equal(rateLimitKey('2001:db8:2:1::1', 1), '::/1');
    // A nonsensical prefix falls back to the default rather than throwing.
    assert.equal(rateLimitKey('2001:db8:2:1::1', 0), '2001:db8:2:1::/64');
    assert.equal(rateLimitKey('2001:db8:2:1::1', 129), '2001:db8:2:1::/64');
    assert.equal(rateLimitKey('2001:db8:2:1::1', Number.NaN), '2001:db8:2:1::/64');
  });

  it('puts every unparseable address in one shared window, never throws', () => {
    for (const text of ['garbage', '', '0xc6.0x33.0x64.7', undefined]) assert.equal(rateLimitKey(text), UNPARSEABLE_KEY);
  });
});

describe('RATE_LIMIT_IPV6_PREFIX', () => {
  it('defaults to 64 and accepts 1..128', () => {
    assert.equal(loadConfig(commonVars(3000), {}).RATE_LIMIT_IPV6_PREFIX, 64);
    assert.equal(loadConfig(commonVars(3000), { RATE_LIMIT_IPV6_PREFIX: '48' }).RATE_LIMIT_IPV6_PREFIX, 48);
    assert.equal(loadConfig(commonVars(3000), { RATE_LIMIT_IPV6_PREFIX: '128' }).RATE_LIMIT_IPV6_PREFIX, 128);
    for (const bad of ['0', '129', '/64', 'sixty-four']) {
      assert.throws(() => loadConfig(commonVars(3000), { RATE_LIMIT_IPV6_PREFIX: bad }), ConfigErrors, bad);
    }
  });
});
