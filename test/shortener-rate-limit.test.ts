import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { manualClock } from '../src/kit/clock.js';
import type { App } from '../src/kit/http/app.js';
import { connectRedis } from '../src/kit/redis.js';
import { CREATE_LIMIT } from '../src/shortener/app.js';
import { assertEnvelope, startShortener, countLinks, shortenerDatabase, withShortener } from './helpers/shortener.js';
import { waitReady, withoutRedis } from './helpers/redis.js';
import { fileDatabase } from './helpers/database.js';

const db = fileDatabase(shortenerDatabase);

interface Attempt {
  status: number;
  limit: unknown;
  remaining: unknown;
  retryAfter: unknown;
  body: Record<string, unknown>;
}

async function create(app: App, opts: { ip?: string; headers?: Record<string, string>; payload?: unknown } = {}): Promise<Attempt> {
  const res = await app.inject({
    method: 'POST',
    url: '/api/links',
    payload: (opts.payload ?? { url: 'https://example.com/limited' }) as Record<string, unknown>,
    headers: opts.headers,
    remoteAddress: opts.ip ?? '203.0.113.10',
  });
  return {
    status: res.statusCode,
    limit: res.headers['x-ratelimit-limit'],
    remaining: res.headers['x-ratelimit-remaining'],
    retryAfter: res.headers['retry-after'],
    body: res.json() as Record<string, unknown>,
  };
}

function assertTooMany(attempt: Attempt, seconds: number): void {
  assert.equal(attempt.status, 429, JSON.stringify(attempt.body));
  assert.equal(attempt.retryAfter, String(seconds));
  assert.equal(attempt.limit, '10');
  assert.equal(attempt.remaining, '0');
  const message = assertEnvelope(attempt.body, 429, 'Too Many Requests');
  assert.match(message, new RegExp(`\\b${seconds} seconds?\\b`));
}

/** A shortener on this file's database with a clock of its own, configured by `env`. */
function withApp<T>(fn: (app: App, clock: ReturnType<typeof manualClock>) => Promise<T>, env: Record<string, string> = {}): Promise<T> {
  const clock = manualClock();
  return withShortener({ pool: db.pool, clock, env }, (app) => fn(app, clock));
}

describe('create rate limit: 10 per fixed 60 s window per IP', () => {
  it('uses the limits of the spec', () => {
    assert.deepEqual(CREATE_LIMIT, { max: 10, windowMs: 60_000 });
  });

  it('requests 1-10 succeed with X-RateLimit-Limit 10 and Remaining 9..0; the 11th is a 429 with Retry-After', async () => {
    await withApp(async (app, clock) => {
      const before = await countLinks(db.pool);
      for (let i = 1; i <= 10; i++) {
        const attempt = await create(app);
        assert.equal(attempt.status, 201, `request ${i}`);
        assert.equal(attempt.limit, '10');
        assert.equal(attempt.remaining, String(10 - i));
        assert.equal(attempt.retryAfter, undefined);
        clock.advance(1000);
      }
      // 10 s have passed since the window opened; 20.5 s more leaves 29.5 s, rounded up to 30.
      clock.advance(20_500);
      assertTooMany(await create(app), 30);
      assert.equal(await countLinks(db.pool), before + 10);
    });
  });

  it('Retry-After is the whole seconds to the window end, rounded up', async () => {
    await withApp(async (app, clock) => {
      for (let i = 0; i < 10; i++) assert.equal((await create(app)).status, 201);
      clock.advance(20_500);
      assertTooMany(await create(app), 40);
      clock.advance(19_000);
      assertTooMany(await create(app), 21);
      clock.advance(20_499);
      assertTooMany(await create(app), 1);
      clock.advance(0.5);
      assertTooMany(await create(app), 1);
    });
  });

  it('rejected requests count and keep the IP limited until the window ends, then the counter resets', async () => {
    await withApp(async (app, clock) => {
      for (let i = 0; i < 10; i++) assert.equal((await create(app)).status, 201);
      for (let i = 11; i <= 15; i++) assertTooMany(await create(app), 60);
      clock.advance(59_999);
      assertTooMany(await create(app), 1);
      clock.advance(1);
      const fresh = await create(app);
      assert.equal(fresh.status, 201);
      assert.equal(fresh.remaining, '9');
      // The new window started at that request: it has the full 60 s.
      for (let i = 0; i < 9; i++) assert.equal((await create(app)).status, 201);
      assertTooMany(await create(app), 60);
    });
  });

  it('invalid requests count too: bad bodies, wrong content type, malformed JSON', async () => {
    await withApp(async (app) => {
      const ip = '203.0.113.20';
      const invalid = await create(app, { ip, payload: { url: 'ftp://example.com/' } });
      assert.equal(invalid.status, 400);
      assert.equal(invalid.limit, '10');
      assert.equal(invalid.remaining, '9');
      assert.equal((await create(app, { ip, payload: {} })).status, 400);
      assert.equal((await create(app, { ip, payload: { url: 7 } })).status, 400);
      const textPlain = await app.inject({
        method: 'POST',
        url: '/api/links',
        headers: { 'content-type': 'text/plain' },
        payload: 'https://example.com/',
        remoteAddress: ip,
      });
      assert.equal(textPlain.statusCode, 415);
      const badJson = await app.inject({
        method: 'POST',
        url: '/api/links',
        headers: { 'content-type': 'application/json' },
        payload: '{',
        remoteAddress: ip,
      });
      assert.equal(badJson.statusCode, 400);
      assert.equal(badJson.headers['x-ratelimit-remaining'], '5');
      for (let i = 6; i <= 10; i++) assert.equal((await create(app, { ip })).status, 201, `request ${i}`);
      assertTooMany(await create(app, { ip }), 60);
      // Once limited, even an invalid body gets the 429 (the limit is checked first).
      assertTooMany(await create(app, { ip, payload: { url: 'javascript:alert(1)' } }), 60);
    });
  });

  it('counters are per IP, and each IP window starts at its own first request', async () => {
    await withApp(async (app, clock) => {
      const a = '198.51.100.1';
      const b = '198.51.100.2';
      for (let i = 0; i < 10; i++) assert.equal((await create(app, { ip: a })).status, 201);
      assertTooMany(await create(app, { ip: a }), 60);
      const other = await create(app, { ip: b, payload: { url: 'https://example.com/b' } });
      assert.equal(other.status, 201);
      assert.equal(other.remaining, '9');
      clock.advance(30_000);
      for (let i = 0; i < 9; i++) assert.equal((await create(app, { ip: b })).status, 201);
      assertTooMany(await create(app, { ip: b }), 30);
      clock.advance(30_000);
      // A's window ended; B's (started at the same instant here) too.
      assert.equal((await create(app, { ip: a })).status, 201);
      assert.equal((await create(app, { ip: b })).status, 201);

      const c = '198.51.100.3';
      clock.advance(10_000);
      for (let i = 0; i < 10; i++) assert.equal((await create(app, { ip: c })).status, 201);
      assertTooMany(await create(app, { ip: c }), 60);
      clock.advance(50_000);
      // A's second window started 60 s ago: over. C's started 50 s ago: 10 s left.
      assert.equal((await create(app, { ip: a })).status, 201);
      assertTooMany(await create(app, { ip: c }), 10);
    });
  });

  it('redirects and stats are not limited', async () => {
    await withApp(async (app) => {
      const ip = '203.0.113.30';
      const first = await create(app, { ip });
      const code = (first.body.data as { code: string }).code;
      for (let i = 0; i < 9; i++) await create(app, { ip });
      assertTooMany(await create(app, { ip }), 60);
      for (let i = 0; i < 30; i++) {
        const redirect = await app.inject({ method: 'GET', url: `/${code}`, remoteAddress: ip });
        assert.equal(redirect.statusCode, 302);
        assert.equal(redirect.headers['x-ratelimit-limit'], undefined);
      }
      const stats = await app.inject({ method: 'GET', url: `/api/links/${code}`, remoteAddress: ip });
      assert.equal(stats.statusCode, 200);
    });
  });

  it('two limiters (two app instances, no Redis) keep their own counters', async () => {
    const clock = manualClock();
    await withShortener({ pool: db.pool, clock }, (one) =>
      withShortener({ pool: db.pool, clock }, async (two) => {
        for (let i = 0; i < 10; i++) assert.equal((await create(one)).status, 201);
        assert.equal((await create(one)).status, 429);
        assert.equal((await create(two)).status, 201);
      }),
    );
  });
});

describe('client IP behind a proxy', () => {
  it('without TRUST_PROXY, X-Forwarded-For is ignored', async () => {
    await withApp(async (app) => {
      for (let i = 0; i < 10; i++) {
        const attempt = await create(app, { ip: '127.0.0.1', headers: { 'x-forwarded-for': `192.0.2.${i}` } });
        assert.equal(attempt.status, 201);
      }
      assertTooMany(await create(app, { ip: '127.0.0.1', headers: { 'x-forwarded-for': '192.0.2.200' } }), 60);
    });
  });

  it('with TRUST_PROXY=127.0.0.1, X-Forwarded-For set by that proxy is the client IP', async () => {
    await withApp(
      async (app) => {
        const viaProxy = (client: string) => create(app, { ip: '127.0.0.1', headers: { 'x-forwarded-for': client } });
        for (let i = 0; i < 10; i++) assert.equal((await viaProxy('192.0.2.1')).status, 201);
        assertTooMany(await viaProxy('192.0.2.1'), 60);
        // Another client behind the same proxy has its own counter.
        assert.equal((await viaProxy('192.0.2.2')).status, 201);
        // A spoofed chain: the proxy appends the real peer, which is what counts.
        assertTooMany(await viaProxy('10.10.10.10, 192.0.2.1'), 60);
      },
      { TRUST_PROXY: '127.0.0.1' },
    );
  });

  it('with TRUST_PROXY set, a header from an untrusted peer is ignored', async () => {
    await withApp(
      async (app) => {
        const peer = '198.51.100.77';
        for (let i = 0; i < 10; i++) {
          assert.equal((await create(app, { ip: peer, headers: { 'x-forwarded-for': `192.0.2.${i}` } })).status, 201);
        }
        assertTooMany(await create(app, { ip: peer, headers: { 'x-forwarded-for': '192.0.2.99' } }), 60);
      },
      { TRUST_PROXY: '127.0.0.1' },
    );
  });
});

describe('one window per client, however its address is spelled (behind a trusted proxy)', () => {
  const viaProxy = (app: App, client: string) => create(app, { ip: '127.0.0.1', headers: { 'x-forwarded-for': client } });

  /** Spends a client's 10 creates under the first spelling, then checks every other spelling is the same client. */
  async function assertOneWindow(app: App, spellings: string[]): Promise<void> {
    for (let i = 1; i <= 10; i++) {
      const attempt = await viaProxy(app, spellings[(i - 1) % spellings.length]!);
      assert.equal(attempt.status, 201, `request ${i} as ${spellings[(i - 1) % spellings.length]}`);
      assert.equal(attempt.remaining, String(10 - i));
    }
    for (const spelling of spellings) assertTooMany(await viaProxy(app, spelling), 60);
  }

  it('IPv4, IPv4-mapped IPv6 and zero-padded IPv4 are one client', async () => {
    await withApp(
      async (app) => {
        await assertOneWindow(app, ['198.51.100.7', '::ffff:198.51.100.7', '198.051.100.007', '::FFFF:C633:6407', '198.51.100.7:4711']);
        // A neighbour keeps its own window.
        assert.equal((await viaProxy(app, '198.51.100.8')).status, 201);
      },
      { TRUST_PROXY: '127.0.0.1' },
    );
  });

  it('IPv6 in upper case, with leading zeros or brackets is one client', async () => {
    await withApp(
      async (app) => {
        await assertOneWindow(app, [
          '2001:db8:2::1',
          '2001:DB8:2::1',
          '2001:0db8:0002::0001',
          '[2001:db8:2::1]:443',
          '2001:db8:2:0:0:0:0:1',
        ]);
      },
      { TRUST_PROXY: '127.0.0.1' },
    );
  });

  it('two addresses in one /64 share one window; another /64 has its own', async () => {
    await withApp(
      async (app) => {
        await assertOneWindow(app, ['2001:db8:3::1', '2001:db8:3:0:ffff:ffff:ffff:fffe', '2001:db8:3::abcd:1234']);
        // The next /64 up is another customer.
        const next = await viaProxy(app, '2001:db8:3:1::1');
        assert.equal(next.status, 201);
        assert.equal(next.remaining, '9');
      },
      { TRUST_PROXY: '127.0.0.1' },
    );
  });

  it('many /64s of one /48 together get 16 times the limit; another /48 is unaffected', async () => {
    await withApp(
      async (app) => {
        // 160 creates spread over 16 /64s of 2001:db8:7::/48, each /64 within its own 10.
        for (let i = 0; i < 160; i++) {
          const attempt = await viaProxy(app, `2001:db8:7:${(i % 16).toString(16)}::1`);
          assert.equal(attempt.status, 201, `request ${i + 1}`);
        }
        // A fresh /64 of the same /48 is refused: the site has used its 16x (the headers report the site's window).
        const refused = await viaProxy(app, '2001:db8:7:ff::1');
        assert.equal(refused.status, 429, JSON.stringify(refused.body));
        assert.equal(refused.limit, '160');
        assert.equal(refused.remaining, '0');
        // Another /48 keeps its own windows.
        assert.equal((await viaProxy(app, '2001:db8:8::1')).status, 201);
      },
      { TRUST_PROXY: '127.0.0.1' },
    );
  });

  it('RATE_LIMIT_IPV6_PREFIX=48 groups a whole /48; 128 keys each address', async () => {
    await withApp(
      async (app) => {
        await assertOneWindow(app, ['2001:db8:4:1::1', '2001:db8:4:2::1', '2001:db8:4:ffff::1']);
        assert.equal((await viaProxy(app, '2001:db8:5::1')).status, 201);
      },
      { TRUST_PROXY: '127.0.0.1', RATE_LIMIT_IPV6_PREFIX: '48' },
    );
    await withApp(
      async (app) => {
        await assertOneWindow(app, ['2001:db8:6::1', '2001:DB8:6::0001']);
        assert.equal((await viaProxy(app, '2001:db8:6::2')).status, 201);
      },
      { TRUST_PROXY: '127.0.0.1', RATE_LIMIT_IPV6_PREFIX: '128' },
    );
  });

  it('a socket address in IPv4-mapped form is the same client as its IPv4 form (no proxy)', async () => {
    await withApp(async (app) => {
      for (let i = 1; i <= 10; i++) {
        assert.equal((await create(app, { ip: i % 2 === 0 ? '::ffff:203.0.113.50' : '203.0.113.50' })).status, 201);
      }
      assertTooMany(await create(app, { ip: '::ffff:203.0.113.50' }), 60);
      assertTooMany(await create(app, { ip: '203.0.113.50' }), 60);
    });
  });

  it('addresses that do not parse share one window and never cause a 500', async () => {
    await withApp(
      async (app) => {
        const forged = ['unknown', 'garbage', '0xc6.0x33.0x64.7', '3325256711', '999.1.1.1', '[::1', '%00', 'a'.repeat(300)];
        for (let i = 1; i <= 10; i++) {
          const attempt = await viaProxy(app, forged[(i - 1) % forged.length]!);
          assert.equal(attempt.status, 201, `request ${i}: ${JSON.stringify(attempt.body)}`);
        }
        for (const text of forged) assertTooMany(await viaProxy(app, text), 60);
        // A well-formed client behind the same proxy is not affected.
        assert.equal((await viaProxy(app, '198.51.100.99')).status, 201);
      },
      { TRUST_PROXY: '127.0.0.1' },
    );
  });
});

describe('create rate limit with Redis', { skip: withoutRedis }, () => {
  const redisUrl = process.env.REDIS_URL ?? '';
  // A documentation-range IPv6 /64 unique to this run: its key cannot meet anyone else's.
  // Groups in 0x1000-0xffff have no leading zero to drop, so the key is written as it is stored.
  const group = () => (0x1000 + (randomBytes(2).readUInt16BE(0) % 0xf000)).toString(16);
  const network = `2001:db8:${group()}:${group()}`;
  const ip = `${network}:0:0:0:1`;
  const key = `shortener:create:${network}::/64`;

  it('two instances sharing one Redis and one database allow exactly 10 per IP between them', async () => {
    const redisA = connectRedis(redisUrl, () => {});
    const redisB = connectRedis(redisUrl, () => {});
    await waitReady(redisA);
    await waitReady(redisB);
    const { app: appA } = await startShortener({ pool: db.pool, redis: redisA });
    const { app: appB } = await startShortener({ pool: db.pool, redis: redisB });
    try {
      await redisA.del(key);
      const before = await countLinks(db.pool);
      const attempts = await Promise.all(
        Array.from({ length: 30 }, (_, i) => create(i % 2 === 0 ? appA : appB, { ip, payload: { url: `https://example.com/${i}` } })),
      );
      const statuses = attempts.map((a) => a.status);
      assert.equal(statuses.filter((s) => s === 201).length, 10, statuses.join(','));
      assert.equal(statuses.filter((s) => s === 429).length, 20, statuses.join(','));
      assert.equal(await countLinks(db.pool), before + 10);
      // The remaining counts seen across both instances are exactly 9..0, each once.
      const remaining = attempts
        .filter((a) => a.status === 201)
        .map((a) => Number(a.remaining))
        .sort((x, y) => x - y);
      assert.deepEqual(remaining, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      for (const a of attempts.filter((x) => x.status === 429)) {
        assert.ok(Number(a.retryAfter) >= 59 && Number(a.retryAfter) <= 60, `Retry-After ${String(a.retryAfter)}`);
      }
      // The window lives in Redis with the spec's length.
      assert.equal(await redisA.get(key), '30');
      const ttl = await redisA.pttl(key);
      assert.ok(ttl > 50_000 && ttl <= 60_000, `ttl ${ttl}`);
    } finally {
      await redisA.del(key).catch(() => {});
      await appA.close();
      await appB.close();
      redisA.disconnect();
      redisB.disconnect();
    }
  });

  it('with Redis unreachable, create is still limited in-process and never fails', async () => {
    const dead = connectRedis('redis://127.0.0.1:1', () => {});
    const { app } = await startShortener({ pool: db.pool, redis: dead });
    try {
      for (let i = 1; i <= 10; i++) {
        const attempt = await create(app, { ip: '203.0.113.99' });
        assert.equal(attempt.status, 201, `request ${i}: ${JSON.stringify(attempt.body)}`);
        assert.equal(attempt.remaining, String(10 - i));
      }
      const limited = await create(app, { ip: '203.0.113.99' });
      assert.equal(limited.status, 429);
      assert.equal(limited.retryAfter, '60');
      assert.equal((await create(app, { ip: '203.0.113.100' })).status, 201);
    } finally {
      await app.close();
      dead.disconnect();
    }
  });
});
