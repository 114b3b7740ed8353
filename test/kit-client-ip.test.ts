import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { IncomingMessage } from 'node:http';
import proxyAddr from '@fastify/proxy-addr';
import fc from 'fast-check';
import { canonicalIp, rateLimitKey, rateLimitKeys, UNPARSEABLE_KEY } from '../src/kit/http/client-ip.js';
import { trustedProxy } from '../src/kit/http/trusted-proxy.js';
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
    const spellings = [
      '2001:DB8:2::1',
      '2001:0db8:0002::0001',
      '2001:db8:2:0:0:0:0:1',
      '[2001:db8:2::1]',
      '[2001:db8:2::1]:443',
      '2001:db8:2::1%eth0',
    ];
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

describe('rateLimitKeys: the levels a client address is limited at', () => {
  it('IPv6: its /64 and its /48 (or the configured prefixes); IPv4, mapped IPv4 and nonsense: one key', () => {
    assert.deepEqual(rateLimitKeys('2001:db8:1:2:3::4', { prefix: 64, widePrefix: 48 }), ['2001:db8:1:2::/64', '2001:db8:1::/48']);
    assert.deepEqual(rateLimitKeys('2001:db8:1:2:3::4', { prefix: 64, widePrefix: 56 }), ['2001:db8:1:2::/64', '2001:db8:1::/56']);
    assert.deepEqual(rateLimitKeys('2001:db8:1:2:3::4', { prefix: 64, widePrefix: 64 }), ['2001:db8:1:2::/64']);
    assert.deepEqual(rateLimitKeys('198.51.100.7', { prefix: 64, widePrefix: 48 }), ['198.51.100.7']);
    assert.deepEqual(rateLimitKeys('::ffff:198.51.100.7', { prefix: 64, widePrefix: 48 }), ['198.51.100.7']);
    assert.deepEqual(rateLimitKeys('not an address', { prefix: 64, widePrefix: 48 }), [UNPARSEABLE_KEY]);
  });

  it('RATE_LIMIT_IPV6_WIDE_PREFIX: 48 by default, 16..128', () => {
    assert.equal(loadConfig(commonVars(1), {}).RATE_LIMIT_IPV6_WIDE_PREFIX, 48);
    assert.equal(loadConfig(commonVars(1), { RATE_LIMIT_IPV6_WIDE_PREFIX: '56' }).RATE_LIMIT_IPV6_WIDE_PREFIX, 56);
    assert.throws(() => loadConfig(commonVars(1), { RATE_LIMIT_IPV6_WIDE_PREFIX: '8' }), ConfigErrors);
  });
});

describe('trustedProxy: the same answers as proxy-addr, without parsing plain IPv4', () => {
  const octet = fc.oneof(fc.integer({ min: 0, max: 255 }), fc.constantFrom(0, 1, 10, 127, 172, 192, 255, 256, 999));
  const dotted = fc.tuple(octet, octet, octet, octet).map((parts) => parts.join('.'));
  const address = fc.oneof(
    dotted,
    dotted.map((a) => `::ffff:${a}`),
    dotted.map((a) => `::FFFF:${a}`),
    dotted.map((a) => `::${a}`),
    dotted.map((a) => a.replace(/^(\d)/, '0$1')),
    fc.ipV4(),
    fc.ipV4Extended(),
    fc.ipV6(),
    fc.constantFrom(
      '127.0.0.1',
      '10.1.2.3',
      '::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '1.2.3',
      '0x7f.0.0.1',
      '',
      ' ',
      'x',
      '1.2.3.4.5',
      '1.2.3.4 ',
    ),
    fc.string({ maxLength: 20 }),
  );
  const lists: string[][] = [
    ['127.0.0.1'],
    ['10.0.0.0/8', '192.168.1.1'],
    ['172.16.0.0/12', '127.0.0.1/32', '198.51.100.7/31'],
    ['0.0.0.0/1'],
    ['10.0.0.5/8'],
    ['loopback'],
    ['127.0.0.1', '::1'],
    ['::ffff:10.0.0.0/104'],
    ['2001:db8::/32', '10.0.0.0/8'],
    ['010.0.0.1'],
  ];
  // A request as proxy-addr reads it: the socket's address, then X-Forwarded-For's.
  const request = (socket: string, forwarded: string[]) =>
    ({
      socket: { remoteAddress: socket },
      headers: forwarded.length > 0 ? { 'x-forwarded-for': forwarded.join(', ') } : {},
    }) as unknown as IncomingMessage;

  for (const list of lists) {
    it(`answers each address and X-Forwarded-For chain as proxy-addr does for ${list.join(',')}`, () => {
      const fast = trustedProxy(list);
      const reference = proxyAddr.compile(list);
      fc.assert(
        fc.property(address, fc.nat(3), (a, hop) => {
          assert.equal(fast(a, hop), reference(a, hop), a);
        }),
        { numRuns: 3000 },
      );
      fc.assert(
        fc.property(address, fc.array(address, { maxLength: 4 }), (socket, chain) => {
          const req = request(socket, chain);
          assert.deepEqual(proxyAddr.all(req, fast), proxyAddr.all(req, reference));
        }),
        { numRuns: 2000 },
      );
    });
  }

  it('is exact at the edges of a range', () => {
    const fast = trustedProxy(['10.0.0.0/8', '192.168.1.128/25']);
    for (const [a, trusted] of [
      ['10.0.0.0', true],
      ['10.255.255.255', true],
      ['9.255.255.255', false],
      ['11.0.0.0', false],
      ['192.168.1.127', false],
      ['192.168.1.128', true],
      ['192.168.1.255', true],
      ['::ffff:10.2.3.4', true],
      ['::ffff:11.2.3.4', false],
    ] as const) {
      assert.equal(fast(a, 0), trusted, a);
    }
  });

  it('refuses a list proxy-addr refuses', () => {
    assert.throws(() => trustedProxy(['not an address']));
    assert.throws(() => trustedProxy(['10.0.0.0/33']));
  });
});
