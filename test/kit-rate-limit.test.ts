import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { manualClock, systemClock } from '../src/kit/clock.js';
import { type CounterStore, FixedWindowLimiter, MemoryCounterStore, RedisCounterStore } from '../src/kit/rate-limit.js';
import { awaitRedisAtStart, connectRedis } from '../src/kit/redis.js';
import { waitReady, withoutRedis } from './helpers/redis.js';

describe('clock', () => {
  it('systemClock is the wall clock in ms', () => {
    const before = Date.now();
    const now = systemClock();
    assert.ok(now >= before && now <= Date.now());
  });

  it('manualClock moves only when told', () => {
    const clock = manualClock(1_000);
    assert.equal(clock(), 1_000);
    assert.equal(clock(), 1_000);
    clock.advance(250);
    assert.equal(clock(), 1_250);
    clock.set(5_000);
    assert.equal(clock(), 5_000);
    assert.equal(manualClock()(), Date.UTC(2026, 0, 1));
  });
});

describe('FixedWindowLimiter with MemoryCounterStore', () => {
  function setup(max = 10, windowMs = 60_000) {
    const clock = manualClock();
    const store = new MemoryCounterStore(clock);
    return { clock, store, limiter: new FixedWindowLimiter(max, windowMs, store, clock) };
  }

  it('allows max requests per window, counts the rejected ones, and resets at the window end', async () => {
    const { clock, store, limiter } = setup();
    try {
      for (let i = 1; i <= 10; i++) {
        const d = await limiter.consume('ip');
        assert.deepEqual(d, { limited: false, limit: 10, remaining: 10 - i, retryAfterSeconds: 60 });
      }
      clock.advance(20_500);
      assert.deepEqual(await limiter.consume('ip'), { limited: true, limit: 10, remaining: 0, retryAfterSeconds: 40 });
      for (let i = 12; i <= 15; i++) assert.equal((await limiter.consume('ip')).limited, true);
      assert.equal((await store.peek('ip'))?.count, 15);
      clock.advance(39_499);
      assert.deepEqual(await limiter.consume('ip'), { limited: true, limit: 10, remaining: 0, retryAfterSeconds: 1 });
      clock.advance(1);
      // Exactly at the window end a new window opens.
      assert.deepEqual(await limiter.consume('ip'), { limited: false, limit: 10, remaining: 9, retryAfterSeconds: 60 });
      assert.equal((await store.peek('ip'))?.count, 1);
    } finally {
      store.close();
    }
  });

  it('keys are independent and each window starts at the key\u2019s first request', async () => {
    const { clock, store, limiter } = setup(2, 10_000);
    try {
      await limiter.consume('a');
      clock.advance(4_000);
      await limiter.consume('b');
      await limiter.consume('a');
      assert.equal((await limiter.consume('a')).limited, true);
      assert.equal((await limiter.consume('b')).limited, false);
      clock.advance(6_000);
      assert.equal((await limiter.consume('a')).limited, false, 'a: its window started 10 s ago');
      const b = await limiter.consume('b');
      assert.equal(b.limited, true, 'b: its window started 6 s ago');
      assert.equal(b.retryAfterSeconds, 4);
    } finally {
      store.close();
    }
  });

  it('sweeps expired windows', async () => {
    const { clock, store } = setup();
    try {
      for (let i = 0; i < 100; i++) await store.hit(`old${i}`, 60_000);
      clock.advance(30_000);
      for (let i = 0; i < 50; i++) await store.hit(`new${i}`, 60_000);
      // An old key hit again keeps its window (and its place).
      await store.hit('old0', 60_000);
      assert.equal(store.size, 150);
      clock.advance(30_000);
      store.sweep();
      assert.equal(store.size, 50);
      assert.equal(await store.peek('old0'), undefined);
      assert.equal((await store.peek('new0'))?.count, 1);
      clock.advance(30_000);
      store.sweep();
      assert.equal(store.size, 0);
    } finally {
      store.close();
    }
  });

  it('sweeps on its own timer', async () => {
    const clock = manualClock();
    const store = new MemoryCounterStore(clock, 1000, 20);
    try {
      await store.hit('a', 1000);
      clock.advance(1000);
      await new Promise((r) => setTimeout(r, 80));
      assert.equal(store.size, 0);
    } finally {
      store.close();
    }
  });

  it('stays bounded under 100,000 distinct keys', async () => {
    const clock = manualClock();
    const maxKeys = 5_000;
    const store = new MemoryCounterStore(clock, maxKeys);
    try {
      for (let i = 0; i < 100_000; i++) {
        await store.hit(`k${i}`, 60_000);
        if (i % 1000 === 0) clock.advance(1);
        assert.ok(store.size <= maxKeys);
      }
      assert.equal(store.size, maxKeys);
      // The newest keys are the ones kept.
      assert.equal((await store.peek('k99999'))?.count, 1);
      assert.equal(await store.peek('k0'), undefined);
    } finally {
      store.close();
    }
  });

  it('the default bound also holds', async () => {
    const clock = manualClock();
    const store = new MemoryCounterStore(clock);
    try {
      for (let i = 0; i < 100_000; i++) await store.hit(`k${i}`, 60_000);
      assert.ok(store.size <= 200_000);
      // Once they expire, a sweep frees all of them.
      clock.advance(60_000);
      store.sweep();
      assert.equal(store.size, 0);
    } finally {
      store.close();
    }
  });
});

describe('RedisCounterStore', { skip: withoutRedis }, () => {
  const redisUrl = process.env.REDIS_URL ?? '';
  const prefix = () => `test:kit-rate-limit:${randomBytes(6).toString('hex')}:`;

  it('counts in Redis with a TTL of the window, shared by two stores', async () => {
    const one = connectRedis(redisUrl, () => {});
    const two = connectRedis(redisUrl, () => {});
    const p = prefix();
    const clock = manualClock();
    const memOne = new MemoryCounterStore(clock);
    const memTwo = new MemoryCounterStore(clock);
    try {
      await waitReady(one);
      await waitReady(two);
      const a = new FixedWindowLimiter(5, 60_000, new RedisCounterStore(one, p, memOne, clock), clock);
      const b = new FixedWindowLimiter(5, 60_000, new RedisCounterStore(two, p, memTwo, clock), clock);
      const decisions = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).consume('ip')));
      assert.equal(decisions.filter((d) => !d.limited).length, 5);
      assert.deepEqual(
        decisions
          .filter((d) => !d.limited)
          .map((d) => d.remaining)
          .sort(),
        [0, 1, 2, 3, 4],
      );
      for (const d of decisions) assert.ok(d.retryAfterSeconds >= 59 && d.retryAfterSeconds <= 60, String(d.retryAfterSeconds));
      assert.equal(await one.get(`${p}ip`), '12');
      const ttl = await one.pttl(`${p}ip`);
      assert.ok(ttl > 55_000 && ttl <= 60_000, `ttl ${ttl}`);
      // Nothing went to the in-process fallback.
      assert.equal(memOne.size + memTwo.size, 0);
      // reset() on one instance clears the counter the other counts in.
      await b.reset('ip');
      assert.equal(await one.exists(`${p}ip`), 0);
      assert.equal((await a.consume('ip')).remaining, a.max - 1);
    } finally {
      await one.del(`${p}ip`).catch(() => {});
      memOne.close();
      memTwo.close();
      one.disconnect();
      two.disconnect();
    }
  });

  it('the window ends when the key expires', async () => {
    const redis = connectRedis(redisUrl, () => {});
    const p = prefix();
    const mem = new MemoryCounterStore();
    try {
      await waitReady(redis);
      // Two seconds, so the two hits fall in one window even on a starved machine.
      const limiter = new FixedWindowLimiter(1, 2000, new RedisCounterStore(redis, p, mem), systemClock);
      assert.equal((await limiter.consume('k')).limited, false);
      assert.equal((await limiter.consume('k')).limited, true);
      await new Promise((r) => setTimeout(r, 2100));
      assert.equal((await limiter.consume('k')).limited, false);
    } finally {
      await redis.del(`${p}k`).catch(() => {});
      mem.close();
      redis.disconnect();
    }
  });

  it('falls back to in-process counters while Redis is unreachable, warning once', async () => {
    const warnings: string[] = [];
    const dead = connectRedis('redis://127.0.0.1:1', () => {});
    const clock = manualClock();
    const mem = new MemoryCounterStore(clock);
    try {
      const limiter = new FixedWindowLimiter(3, 60_000, new RedisCounterStore(dead, 'x:', mem, clock, (m) => warnings.push(m)), clock);
      const decisions = [];
      for (let i = 0; i < 5; i++) decisions.push(await limiter.consume('ip'));
      assert.deepEqual(
        decisions.map((d) => d.limited),
        [false, false, false, true, true],
      );
      assert.equal(decisions[3]!.retryAfterSeconds, 60);
      assert.equal((await limiter.consume('ip')).limited, true);
      await limiter.reset('ip');
      assert.equal((await limiter.consume('ip')).limited, false);
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, /redis unavailable/);
    } finally {
      mem.close();
      dead.disconnect();
    }
  });

  it('a start waits for its first connection (shared counters from the first request); an unreachable Redis is warned about and does not stop it', async () => {
    const warnings: string[] = [];
    const log = { warn: (m: string) => warnings.push(m) };
    const live = connectRedis(redisUrl, () => {});
    const dead = connectRedis('redis://127.0.0.1:1', () => {});
    try {
      // Straight after connectRedis the client is still connecting; a command now would fall back.
      assert.notEqual(live.status, 'ready');
      await awaitRedisAtStart(live, log);
      assert.equal(live.status, 'ready');
      assert.equal(await live.ping(), 'PONG');
      assert.deepEqual(warnings, []);
      const started = performance.now();
      await awaitRedisAtStart(dead, log, 300);
      assert.ok(performance.now() - started >= 290, 'waited for the bound');
      assert.deepEqual(warnings, ['redis not reachable 0.3 s after the start; rate limits use in-process counters until it is']);
    } finally {
      live.disconnect();
      dead.disconnect();
    }
  });
});

describe('reserve and release', () => {
  const limits = (account: number, ip: number) => [
    { key: 'account', max: account, windowMs: 60_000 },
    { key: 'ip', max: ip, windowMs: 60_000 },
  ];

  it('memory: counts on every key only when all are below their max; a refusal counts nothing', async () => {
    const clock = manualClock();
    const store = new MemoryCounterStore(clock);
    try {
      const results = await Promise.all(Array.from({ length: 8 }, () => store.reserve(limits(3, 5))));
      assert.deepEqual(
        results.map((r) => r.admitted),
        [true, true, true, false, false, false, false, false],
      );
      assert.equal((await store.peek('account'))?.count, 3);
      assert.equal((await store.peek('ip'))?.count, 3, 'refused reservations left the other key alone');
      assert.deepEqual(
        results[3]!.windows.map((w) => w.count),
        [3, 3],
      );
      // A release gives one back in the same window only.
      await store.release('account', results[0]!.windowIds[0]!);
      assert.equal((await store.peek('account'))?.count, 2);
      const stale = results[1]!.windowIds[0]!;
      clock.advance(60_000);
      const fresh = await store.reserve(limits(3, 5));
      assert.equal(fresh.admitted, true);
      await store.release('account', stale);
      assert.equal((await store.peek('account'))?.count, 1, 'a release from an ended window leaves the new one alone');
    } finally {
      store.close();
    }
  });

  it('redis: two stores reserving at once never pass a max together; release is per window', { skip: withoutRedis }, async () => {
    const one = connectRedis(process.env.REDIS_URL!, () => {});
    const two = connectRedis(process.env.REDIS_URL!, () => {});
    const p = `test:kit-rate-limit:${randomBytes(6).toString('hex')}:`;
    const mem = new MemoryCounterStore();
    try {
      await waitReady(one);
      await waitReady(two);
      const a = new RedisCounterStore(one, p, mem);
      const b = new RedisCounterStore(two, p, mem);
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).reserve(limits(10, 100))));
      assert.equal(results.filter((r) => r.admitted).length, 10);
      assert.equal(await one.get(`${p}account`), '10');
      assert.equal(await one.get(`${p}ip`), '10');
      const ttl = await one.pttl(`${p}ip`);
      assert.ok(ttl > 55_000 && ttl <= 60_000, `ttl ${ttl}`);
      const admitted = results.find((r) => r.admitted)!;
      await a.release('ip', admitted.windowIds[1]!, 60_000);
      assert.equal(await one.get(`${p}ip`), '9');
      // The same key in a later window (here: set afresh) is left alone.
      await one.set(`${p}ip`, '4', 'PX', 60_000 + 40_000);
      await a.release('ip', admitted.windowIds[1]!, 60_000);
      assert.equal(await one.get(`${p}ip`), '4');
      assert.equal(mem.size, 0, 'nothing went to the fallback');
    } finally {
      await one.del(`${p}account`, `${p}ip`).catch(() => {});
      mem.close();
      one.disconnect();
      two.disconnect();
    }
  });

  // A key counted once per new other key: the distinct accounts failing from one address.
  const distinct = (pair: string, max: number) => [
    { key: pair, max: 10, windowMs: 60_000 },
    { key: 'address', max, windowMs: 60_000, onlyIfNew: 0 },
  ];

  async function onlyIfNewHolds(store: CounterStore, peek: (key: string) => Promise<number>) {
    // 3 new pairs at once with 2 places: exactly 2 admitted; a repeat on an admitted pair skips the key.
    const first = await Promise.all(['a', 'b', 'c'].map((pair) => store.reserve(distinct(pair, 2))));
    assert.equal(first.filter((r) => r.admitted).length, 2);
    assert.equal(await peek('address'), 2);
    const admittedPair = ['a', 'b', 'c'][first.findIndex((r) => r.admitted)]!;
    const refusedPair = ['a', 'b', 'c'][first.findIndex((r) => !r.admitted)]!;
    const repeat = await store.reserve(distinct(admittedPair, 2));
    assert.equal(repeat.admitted, true);
    assert.equal(repeat.windowIds[1], '', 'the skipped key was not counted');
    assert.equal(await peek('address'), 2);
    assert.equal((await store.reserve(distinct(refusedPair, 2))).admitted, false, 'the refused pair is still new');
    // 20 concurrent attempts at one new pair when no place is left: none gets through.
    const burst = await Promise.all(Array.from({ length: 20 }, () => store.reserve(distinct('fresh', 2))));
    assert.equal(burst.filter((r) => r.admitted).length, 0);
    // A release of a skipped key gives nothing back.
    await store.release('address', repeat.windowIds[1]!, 60_000);
    assert.equal(await peek('address'), 2);
  }

  it('memory: a key with onlyIfNew is counted once per new other key, atomically', async () => {
    const store = new MemoryCounterStore(manualClock());
    try {
      await onlyIfNewHolds(store, async (key) => (await store.peek(key))?.count ?? 0);
    } finally {
      store.close();
    }
  });

  it('redis: a key with onlyIfNew is counted once per new other key, atomically', { skip: withoutRedis }, async () => {
    const redis = connectRedis(process.env.REDIS_URL!, () => {});
    const p = `test:kit-rate-limit:${randomBytes(6).toString('hex')}:`;
    const mem = new MemoryCounterStore();
    try {
      await waitReady(redis);
      const store = new RedisCounterStore(redis, p, mem);
      await onlyIfNewHolds(store, async (key) => Number((await redis.get(p + key)) ?? 0));
      assert.equal(mem.size, 0, 'nothing went to the fallback');
    } finally {
      await redis.del(...['a', 'b', 'c', 'fresh', 'address'].map((k) => p + k)).catch(() => {});
      mem.close();
      redis.disconnect();
    }
  });
});

describe('consumeAddress: IPv6 clients limited per /64 and per /48', () => {
  const prefixes = { prefix: 64, widePrefix: 48 };

  it('a client rotating through the /64s of its /48 is refused once the /48 has used 16 times the limit', async () => {
    const store = new MemoryCounterStore(manualClock());
    try {
      const limiter = new FixedWindowLimiter(2, 60_000, store);
      const decisions = [];
      for (let i = 0; i < 40; i++) decisions.push(await limiter.consumeAddress('ip:', `2001:db8:5:${i.toString(16)}::1`, prefixes));
      assert.equal(decisions.filter((d) => !d.limited).length, 32);
      assert.ok(decisions.slice(32).every((d) => d.limited && d.limit === 32));
      // Another /48 is not affected; one /64 is still limited on its own.
      assert.equal((await limiter.consumeAddress('ip:', '2001:db8:6::1', prefixes)).limited, false);
      await limiter.consumeAddress('ip:', '2001:db8:7::1', prefixes);
      assert.equal((await limiter.consumeAddress('ip:', '2001:db8:7::2', prefixes)).limited, false);
      assert.equal((await limiter.consumeAddress('ip:', '2001:db8:7::3', prefixes)).limited, true);
      // IPv4 has one level.
      for (let i = 0; i < 2; i++) await limiter.consumeAddress('ip:', '198.51.100.1', prefixes);
      assert.equal((await limiter.consumeAddress('ip:', '198.51.100.1', prefixes)).limited, true);
    } finally {
      store.close();
    }
  });

  it('the two levels follow their settings (/56 as the wide one; equal prefixes: one level)', async () => {
    const store = new MemoryCounterStore(manualClock());
    try {
      const limiter = new FixedWindowLimiter(1, 60_000, store);
      for (let i = 0; i < 16; i++) await limiter.consumeAddress('ip:', `2001:db8:9:${i.toString(16)}::1`, { prefix: 64, widePrefix: 56 });
      assert.equal((await limiter.consumeAddress('ip:', '2001:db8:9:ff::1', { prefix: 64, widePrefix: 56 })).limited, true);
      assert.equal((await limiter.consumeAddress('ip:', '2001:db8:9:100::1', { prefix: 64, widePrefix: 56 })).limited, false);
      assert.equal((await limiter.consumeAddress('ip:', '2001:db8:a:1::1', { prefix: 64, widePrefix: 64 })).limited, false);
      // 17 /64s and 2 /56s, then one key for the single-level client.
      assert.equal(store.size, 17 + 2 + 1 + 1);
    } finally {
      store.close();
    }
  });
});

describe('consumeUnits: a batch counted per item', () => {
  it('admits the first units within the maximum, in one step; concurrent batches never pass it together', async () => {
    const clock = manualClock();
    const store = new MemoryCounterStore(clock);
    try {
      const limiter = new FixedWindowLimiter(10, 60_000, store, clock);
      assert.deepEqual(await limiter.consumeUnits('k', 4), { limited: false, limit: 10, remaining: 6, retryAfterSeconds: 60, admitted: 4 });
      assert.deepEqual(await limiter.consumeUnits('k', 8), { limited: true, limit: 10, remaining: 0, retryAfterSeconds: 60, admitted: 6 });
      assert.equal((await limiter.consumeUnits('k', 1)).admitted, 0);
      const together = await Promise.all(Array.from({ length: 5 }, () => limiter.consumeUnits('other', 3)));
      assert.equal(
        together.reduce((sum, d) => sum + d.admitted, 0),
        10,
      );
      clock.advance(60_000);
      assert.equal((await limiter.consumeUnits('k', 3)).admitted, 3);
    } finally {
      store.close();
    }
  });

  it('per address: the least of the levels (an IPv6 /64 and its /48)', async () => {
    const store = new MemoryCounterStore(manualClock());
    try {
      const limiter = new FixedWindowLimiter(2, 60_000, store);
      const prefixes = { prefix: 64, widePrefix: 48 };
      assert.equal((await limiter.consumeAddressUnits('ip:', '2001:db8:1:1::1', prefixes, 5)).admitted, 2);
      // 13 more /64s of the /48 take 2 each: the /48 (max 32) holds 31, so the next /64 gets 1 of its 2, and then none.
      for (let i = 2; i <= 14; i++) {
        assert.equal((await limiter.consumeAddressUnits('ip:', `2001:db8:1:${i}::1`, prefixes, 2)).admitted, 2);
      }
      assert.equal((await limiter.consumeAddressUnits('ip:', '2001:db8:1:15::1', prefixes, 2)).admitted, 1);
      assert.equal((await limiter.consumeAddressUnits('ip:', '2001:db8:1:16::1', prefixes, 2)).admitted, 0);
    } finally {
      store.close();
    }
  });
});
