import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { systemClock } from '../src/kit/clock.js';
import { createPool } from '../src/kit/db.js';
import { randomCode } from '../src/shortener/codes.js';
import { chooseDestination, type LinkRules } from '../src/shortener/link-rules.js';
import { isWellFormedCode, LinkService } from '../src/shortener/links.js';
import { type BatchVisit, LinkRepository } from '../src/shortener/repository.js';
import { AgentParser, type Visit, VisitorKeys } from '../src/shortener/visits.js';
import {
  type LoadOptions,
  type LoadResult,
  type Measured,
  alternate,
  contextRow,
  cpuSeconds,
  databaseBackendPids,
  defaultGenerator,
  freshBenchDatabase,
  load,
  measure,
  median,
  ratio,
  referenceConfig,
  referenceRow,
  startCeiling,
  startReference,
  startService,
} from './lib.js';

// Redirects to one hot code, redirects spread over 10,000 codes, and stats
// lookups, each beside a bare node:http 302 server measured in the same run.
// Redirects carry a realistic mix of User-Agents (people, link previews,
// crawlers) and referrers, so every click records its visit with analytics on.
// After each redirect run the clicks stored must equal the visits stored and
// the 302s received. Beside each rate: CPU time per request of the service's
// process and of its PostgreSQL backends, read from /proc/<pid>/stat.
// BENCH_SECONDS (default 10) sets the measured duration of each run.
//
// Each redirect path is also measured beside a minimal reference that does the same durable work
// before its 302: plain node:http, the visit derived as the service derives it (its own
// VisitorKeys and AgentParser: the day's salt, HMAC-SHA256 of address and agent, the cached
// User-Agent families, the referrer's host), and the click with its visit written by the same
// statement (LinkRepository.addClicks) under the same group commit (one batch in flight, the
// clicks that arrive meanwhile go out together as the next), on a pool of the same size. What
// remains between the two is Fastify, its hooks (security headers, request ids, metrics,
// logging) and the service's routing. Three alternating rounds (BENCH_ROUNDS), medians; the
// clicks = visits = 302s check holds for every run of both.

const CODES = 10_000;
const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const REFERENCE_FLAG = '--shortener-reference';

// ---------------------------------------------------------------------------------------------
// The reference: node:http, the visit, the same statement under the same group commit.

interface ReferenceConfig {
  databaseUrl: string;
  /** The proxy whose X-Forwarded-For is believed (the service's TRUST_PROXY). */
  trustProxy: string;
}

interface Counted {
  url: string;
  rules: LinkRules | null;
}

interface Waiter {
  visit: Visit;
  /** The link's URL and rules when the click was counted; 404 (no such code) or 410 (refused) otherwise. */
  resolve: (outcome: Counted | 404 | 410) => void;
  reject: (err: unknown) => void;
}

async function serveReference(config: ReferenceConfig & { port: number }): Promise<void> {
  const pool = createPool(config.databaseUrl, { max: 20, applicationName: 'shortener-reference' });
  const repo = new LinkRepository(pool);
  const visitorKeys = new VisitorKeys(repo, systemClock);
  const agents = new AgentParser();

  // Group commit: while one batch is written, the clicks that arrive gather into the next.
  let pending = new Map<string, Waiter[]>();
  let writing = false;
  let scheduled = false;
  const schedule = () => {
    if (writing || scheduled) return;
    scheduled = true;
    setImmediate(() => void write());
  };
  const write = async () => {
    scheduled = false;
    if (pending.size === 0) return;
    writing = true;
    const batch = pending;
    pending = new Map();
    const codes = [...batch.keys()].sort();
    const visits: BatchVisit[] = codes.flatMap((code) => batch.get(code)!.map((w, i) => ({ code, ordinal: i + 1, visit: w.visit })));
    try {
      const decided = await repo.addClicks(
        codes,
        codes.map((c) => batch.get(c)!.length),
        visits,
        new Date(systemClock()),
      );
      for (const code of codes) {
        const result = decided.get(code);
        for (const [i, w] of batch.get(code)!.entries()) {
          w.resolve(!result ? 404 : i < result.granted ? { url: result.original_url, rules: result.rules } : 410);
        }
      }
    } catch (err) {
      for (const waiters of batch.values()) for (const w of waiters) w.reject(err);
    } finally {
      writing = false;
      if (pending.size > 0) schedule();
    }
  };
  const record = (code: string, visit: Visit) =>
    new Promise<Counted | 404 | 410>((resolve, reject) => {
      const waiters = pending.get(code);
      if (waiters) waiters.push({ visit, resolve, reject });
      else pending.set(code, [{ visit, resolve, reject }]);
      schedule();
    });

  const answer = (res: http.ServerResponse, status: number) => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ status }));
  };
  http
    .createServer(async (req, res) => {
      try {
        const code = (req.url ?? '').slice(1);
        if (req.method !== 'GET' || !isWellFormedCode(code)) return answer(res, 404);
        const forwarded = req.headers['x-forwarded-for'];
        const ip =
          req.socket.remoteAddress === config.trustProxy && typeof forwarded === 'string'
            ? forwarded.slice(forwarded.lastIndexOf(',') + 1).trim()
            : req.socket.remoteAddress;
        const visit = await visitorKeys.visit(ip, req.headers['user-agent'], req.headers.referer, agents);
        const outcome = await record(code, visit);
        if (typeof outcome === 'number') return answer(res, outcome);
        // Where this visitor goes: the service's own choice over the rules the click statement returned.
        const destination = chooseDestination(outcome.url, outcome.rules, visit);
        res.writeHead(302, { location: new URL(destination).href, 'cache-control': 'no-store' });
        res.end();
      } catch {
        answer(res, 503);
      }
    })
    .listen(config.port, '127.0.0.1');
}

if (process.argv.includes(REFERENCE_FLAG)) await serveReference(referenceConfig<ReferenceConfig>());

// Weights are roughly what a public short link sees: mostly people, then previews and crawlers.
const AGENTS: Array<[string, number]> = [
  ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36', 14],
  [
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1',
    14,
  ],
  ['Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.144 Mobile Safari/537.36', 10],
  ['Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Safari/605.1.15', 6],
  ['Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0', 4],
  ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0', 4],
  [
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 309.0.0.28.111',
    3,
  ],
  ['Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)', 3],
  ['Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)', 2],
  ['facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)', 2],
  ['WhatsApp/2.23.20.0 A', 2],
  ['Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)', 3],
  ['curl/8.4.0', 2],
  ['python-requests/2.31.0', 1],
];
const REFERRERS: Array<[string | undefined, number]> = [
  [undefined, 10],
  ['https://www.google.com/', 4],
  ['https://t.co/x1y2z3', 3],
  ['https://news.ycombinator.com/item?id=38000000', 2],
  ['https://www.reddit.com/r/programming/comments/abc/', 2],
  ['https://l.facebook.com/l.php?u=x', 2],
  ['https://mail.google.com/', 1],
];

const weighted = <T>(items: Array<[T, number]>) => items.flatMap(([v, w]) => Array<T>(w).fill(v));

/** Header sets in a fixed interleaving of the weighted agents and referrers, each from its own client address. */
function visitorHeaders(): Array<Record<string, string>> {
  const agents = weighted(AGENTS);
  const referrers = weighted(REFERRERS);
  return Array.from({ length: agents.length * 7 }, (_, i) => {
    const referer = referrers[(i * 5) % referrers.length];
    return {
      'user-agent': agents[i % agents.length]!,
      'x-forwarded-for': `198.51.${(i >> 8) & 255}.${i & 255}`,
      ...(referer && { referer }),
    };
  });
}

async function totals(db: pg.Client): Promise<{ clicks: number; visits: number }> {
  const { rows } = await db.query<{ clicks: string; visits: string }>(
    'SELECT (SELECT coalesce(sum(clicks), 0) FROM links)::bigint AS clicks, (SELECT coalesce(sum(visits), 0) FROM visit_counts)::bigint AS visits',
  );
  return { clicks: Number(rows[0]!.clicks), visits: Number(rows[0]!.visits) };
}

/**
 * Totals once the service has written everything it accepted: a timed load
 * generator stops with requests in flight, which the service still counts
 * just after. Stable over 300 ms (at most 10 s).
 */
async function settledTotals(db: pg.Client): Promise<{ clicks: number; visits: number }> {
  let last = await totals(db);
  for (let i = 0; i < 33; i++) {
    await new Promise((r) => setTimeout(r, 300));
    const now = await totals(db);
    if (now.clicks === last.clicks && now.visits === last.visits) return now;
    last = now;
  }
  return last;
}

/** The PostgreSQL backends serving the bench database (this client's own excluded). */
async function backendPids(db: pg.Client, database: string): Promise<number[]> {
  const { rows } = await db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [
    database,
  ]);
  return rows.map((r) => r.pid);
}

/** CPU seconds used by the processes during fn (PostgreSQL backends: those alive at the end, new ones counted from 0). */
async function measureCpu<T>(fn: () => Promise<T>, pids: () => Promise<number[]>): Promise<{ result: T; cpu: number | undefined }> {
  const before = new Map((await pids()).map((pid) => [pid, cpuSeconds([pid]) ?? 0]));
  const result = await fn();
  const after = await pids();
  const used = after.map((pid) => (cpuSeconds([pid]) ?? 0) - (before.get(pid) ?? 0));
  return { result, cpu: cpuSeconds([]) === undefined ? undefined : used.reduce((a, b) => a + b, 0) };
}

const DAY_MS = 86_400_000;
/** Concurrent readers of the visits report: a few dashboards open at once, on a 2-core machine. */
const REPORT_CONNECTIONS = 4;
const SEEDED_VISITS = 1_000_000;
const SEEDED_DAYS = 90;
/** Distinct (class, referrer, browser, OS, device) rows per hour, out of the few each dimension has (at most 168 here). */
const ROWS_PER_HOUR = 100;
/** Unique visitors per day: most visits of a day come from different people. */
const VISITORS_PER_DAY = 6_000;

/**
 * 1,000,000 visits of one link spread evenly over the last 90 days, written
 * straight into the visit tables as the click statement leaves them: hourly
 * rows per traffic class, referrer host, browser, OS and device, and one row
 * per visitor and day. A few SQL statements (generate_series), not a million
 * redirects. The link's clicks are set to match, so clicks = visits holds.
 */
async function seedVisits(
  db: pg.Client,
  code: string,
  now: number,
): Promise<{ visits: number; rows: number; visitors: number; seconds: number }> {
  const started = Date.now();
  const lastHour = Math.floor(now / 3_600_000) * 3_600_000;
  const hours = SEEDED_DAYS * 24;
  const rows = hours * ROWS_PER_HOUR;
  // Each row gets the integer share of the visits, the first `extra` rows one more, so they sum exactly.
  const share = Math.floor(SEEDED_VISITS / rows);
  const extra = SEEDED_VISITS - share * rows;
  await db.query(
    `INSERT INTO visit_counts (code, hour, class, referrer, browser, os, device, visits)
     SELECT $1, to_timestamp($2::bigint / 1000) - make_interval(hours => h),
            -- Class, referrer and browser in mixed radix (3 × 8 × 7 = 168 distinct rows an hour at most).
            (ARRAY['human', 'bot', 'preview'])[1 + i % 3],
            (ARRAY['(direct)', 'www.google.com', 't.co', 'news.ycombinator.com', 'www.reddit.com', 'l.facebook.com', 'mail.google.com', 'duckduckgo.com'])[1 + (i / 3) % 8],
            (ARRAY['Chrome', 'Mobile Safari', 'Safari', 'Firefox', 'Edge', 'Instagram', '(unknown)'])[1 + (i / 24) % 7],
            (ARRAY['Windows', 'iOS', 'Android', 'Mac OS', 'Linux', '(unknown)'])[1 + i % 6],
            (ARRAY['desktop', 'mobile', 'tablet', '(unknown)'])[1 + i % 4],
            $3::int + CASE WHEN h * $4::int + i < $5::int THEN 1 ELSE 0 END
     FROM generate_series(0, $6::int - 1) AS h, generate_series(0, $4::int - 1) AS i
     ON CONFLICT (code, hour, class, referrer, browser, os, device, country) DO UPDATE SET visits = visit_counts.visits + EXCLUDED.visits`,
    [code, lastHour, share, ROWS_PER_HOUR, extra, hours],
  );
  await db.query(
    `INSERT INTO daily_visitors (code, day, visitor_key)
     SELECT $1, (to_timestamp($2::bigint / 1000) AT TIME ZONE 'UTC')::date - d, decode(md5(d || ':' || v), 'hex')
     FROM generate_series(0, $3::int - 1) AS d, generate_series(1, $4::int) AS v
     ON CONFLICT DO NOTHING`,
    [code, lastHour, SEEDED_DAYS, VISITORS_PER_DAY],
  );
  await db.query('UPDATE links SET clicks = clicks + $2 WHERE code = $1', [code, SEEDED_VISITS]);
  // As autovacuum would soon after such a load: statistics and the visibility map index-only scans read.
  await db.query('VACUUM ANALYZE visit_counts, daily_visitors');
  const { rows: check } = await db.query<{ visits: string; rows: string }>(
    'SELECT sum(visits)::bigint AS visits, count(*)::bigint AS rows FROM visit_counts WHERE code = $1',
    [code],
  );
  return {
    visits: Number(check[0]!.visits),
    rows: Number(check[0]!.rows),
    visitors: SEEDED_DAYS * VISITORS_PER_DAY,
    seconds: (Date.now() - started) / 1000,
  };
}

const answered = (r: LoadResult) => Object.values(r.statusCountsWithWarmup).reduce((a, b) => a + b, 0);
const microsPerRequest = (cpu: number | undefined, r: LoadResult) =>
  cpu === undefined ? 'n/a' : Math.round((cpu * 1e6) / Math.max(1, answered(r)));

export async function run(ctx: { adminUrl: string }): Promise<Record<string, Array<Record<string, string | number>>>> {
  const name = 'bench_shortener';
  const databaseUrl = await freshBenchDatabase(ctx.adminUrl, name);

  // TRUST_PROXY: each simulated visitor's address arrives in X-Forwarded-For, as behind a load balancer.
  // The admin key: the visits report needs a credential of the link's manager.
  const adminKey = randomBytes(32).toString('hex');
  const service = await startService('src/shortener/server.ts', {
    DATABASE_URL: databaseUrl,
    TRUST_PROXY: '127.0.0.1',
    SHORTENER_ADMIN_KEY: adminKey,
  });
  // The same service at the production default log level (info: one access line a request), beside the
  // reference on the hot code, so the cost of logging is read off the same run.
  const serviceAtInfo = await startService('src/shortener/server.ts', {
    DATABASE_URL: databaseUrl,
    TRUST_PROXY: '127.0.0.1',
    SHORTENER_ADMIN_KEY: adminKey,
    LOG_LEVEL: 'info',
  });
  const ceiling = await startCeiling('redirect');
  let reference: Awaited<ReturnType<typeof startReference>> | undefined;
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const generator = defaultGenerator();
  console.log(`shortener: load generator ${generator}${generator === 'wrk' ? ' (timed runs)' : ' (autocannon; fixed-count runs)'}`);
  try {
    // Seeded straight into the table: the create endpoint is rate limited.
    const codes = new Set<string>();
    while (codes.size < CODES) codes.add(randomCode());
    const list = [...codes];
    await db.query('INSERT INTO links (code, original_url) SELECT c, $2 || c FROM unnest($1::text[]) AS c', [
      list,
      'https://example.com/page/',
    ]);
    const hot = list[0]!;
    // One link with device rules and an A/B split, as a marketing link would have: the redirect
    // picks among them from the row the click statement already returns.
    const withRules = list[1]!;
    const rules: LinkRules = {
      ios: 'https://apps.apple.com/app/id000000001',
      android: 'https://play.google.com/store/apps/details?id=example.app',
      split: [{ url: 'https://example.com/variant-b', percent: 30 }],
    };
    await db.query('UPDATE links SET rules = $2 WHERE code = $1', [withRules, JSON.stringify(rules)]);

    const base: Omit<LoadOptions, 'url'> = { connections: 50, durationSeconds: DURATION_SECONDS, warmupSeconds: 2, generator };
    const headerSets = visitorHeaders();
    const rows: Array<Record<string, string | number>> = [];
    const ceilingRun = await measureCpu(
      () => load({ ...base, url: `${ceiling.url}/${hot}`, headerSets }),
      async () => [ceiling.pid],
    );
    const row = (
      label: string,
      m: { result: LoadResult; cpu: number | undefined },
      pgCpu: number | undefined,
      extra: Record<string, string | number> = {},
    ) => ({
      run: label,
      generator: m.result.generator,
      'req/s': Math.round(m.result.rps),
      'p50 ms': m.result.p50,
      'p99 ms': m.result.p99,
      'vs ceiling': `${(ratio(m.result.rps, ceilingRun.result.rps) * 100).toFixed(0)}%`,
      'CPU µs/req (server)': microsPerRequest(m.cpu, m.result),
      'CPU µs/req (PostgreSQL)': pgCpu === undefined ? '' : microsPerRequest(pgCpu, m.result),
      ...extra,
    });
    rows.push(row('bare node:http 302 (ceiling)', ceilingRun, undefined));

    // The redirects, the service and the reference in alternating rounds. Each measured run
    // starts after its warm-up's clicks are all written and ends once its own are, so the
    // clicks and visits it added are its own.
    reference = await startReference(fileURLToPath(import.meta.url), REFERENCE_FLAG, {
      databaseUrl,
      trustProxy: '127.0.0.1',
    } satisfies ReferenceConfig);
    const sample = { 'user-agent': AGENTS[0]![0], 'x-forwarded-for': '198.51.100.7' };
    const answers = await Promise.all(
      [service, reference].map(async (s) => {
        const res = await fetch(`${s.url}/${hot}`, { redirect: 'manual', headers: sample });
        await res.arrayBuffer();
        return `${res.status} ${res.headers.get('location')} ${res.headers.get('cache-control')}`;
      }),
    );
    if (answers[0] !== answers[1]) throw new Error(`the service and the reference answer differently: ${answers[0]} / ${answers[1]}`);
    // An iPhone's visit of the link with rules goes to the same app-store address from both.
    const iphone = { 'user-agent': AGENTS[1]![0], 'x-forwarded-for': '198.51.100.8' };
    const ruled = await Promise.all(
      [service, reference].map(async (s) => {
        const res = await fetch(`${s.url}/${withRules}`, { redirect: 'manual', headers: iphone });
        await res.arrayBuffer();
        return `${res.status} ${res.headers.get('location')}`;
      }),
    );
    if (ruled[0] !== ruled[1] || ruled[0] !== `302 ${rules.ios}`) {
      throw new Error(`the link with rules is answered differently: ${ruled[0]} / ${ruled[1]}`);
    }
    const backends = () => databaseBackendPids(ctx.adminUrl, name);
    const checks: string[] = [];
    const redirects = async (server: { url: string; pid: number }, who: string, label: string, paths: string[]): Promise<Measured> => {
      const opts = { ...base, warmupSeconds: 0, url: server.url, paths, headerSets };
      await load({ ...opts, durationSeconds: 2 });
      const before = await settledTotals(db);
      const m = await measure(opts, { server: server.pid, backends }, 0);
      const after = await settledTotals(db);
      const clicks = after.clicks - before.clicks;
      const visits = after.visits - before.visits;
      const answered302 = m.r.statusCounts['302'] ?? 0;
      // A timed run stops with answers in flight, which the server still counted: at most one per connection.
      const exact = clicks === visits && clicks >= answered302 && clicks - answered302 <= base.connections!;
      checks.push(
        `${who} ${label}: ${clicks} = ${visits} = ${answered302}${clicks > answered302 ? ` + ${clicks - answered302} cut at the end` : ''}`,
      );
      if (!exact) {
        throw new Error(
          `${who} ${label}: clicks ${clicks}, visits ${visits}, 302s ${answered302}: not equal (${JSON.stringify(m.r.statusCounts)})`,
        );
      }
      return m;
    };
    const compared: Array<Record<string, string | number>> = [];
    for (const [label, paths] of [
      ['redirect, one hot code, analytics on', [`/${hot}`]],
      ['redirect, 10,000 codes, analytics on', list.map((c) => `/${c}`)],
      ['redirect, a link with device rules and a split, analytics on', [`/${withRules}`]],
    ] as const) {
      const runs = await alternate(
        () => redirects(reference!, 'reference', label, [...paths]),
        () => redirects(service, 'service', label, [...paths]),
      );
      const own = runs.project;
      const pick = (f: (m: Measured) => number) => median(own.map(f));
      rows.push({
        run: `${label} (median of ${own.length})`,
        generator,
        'req/s': Math.round(pick((m) => m.r.rps)),
        'p50 ms': pick((m) => m.r.p50),
        'p99 ms': pick((m) => m.r.p99),
        'vs ceiling': `${(
          ratio(
            pick((m) => m.r.rps),
            ceilingRun.result.rps,
          ) * 100
        ).toFixed(0)}%`,
        'CPU µs/req (server)': Math.round(pick((m) => m.server ?? 0)),
        'CPU µs/req (PostgreSQL)': Math.round(pick((m) => m.database ?? 0)),
        'socket errors': own.reduce((sum, m) => sum + m.r.errors, 0),
        'clicks = visits = 302s': 'yes, every run of both',
      });
      compared.push(referenceRow(label, runs));
      if (paths.length === 1 && paths[0] === `/${hot}`) {
        const atInfo = await alternate(
          () => redirects(reference!, 'reference', label, [...paths]),
          () => redirects(serviceAtInfo, 'service at LOG_LEVEL=info', label, [...paths]),
        );
        compared.push(referenceRow(`${label}, the service at LOG_LEVEL=info (the default; the rows above: warn)`, atInfo));
      }
    }
    for (const check of checks) console.log(`shortener: clicks = visits = 302s, ${check}`);
    // BENCH_REDIRECTS_ONLY=1: the redirects alone, e.g. for CPU profiles (BENCH_CPU_PROF) of just them.
    const redirectsOnly = process.env.BENCH_REDIRECTS_ONLY === '1';
    const ceilingMeasured: Measured = {
      r: ceilingRun.result,
      server: ceilingRun.cpu === undefined ? undefined : (ceilingRun.cpu * 1e6) / Math.max(1, answered(ceilingRun.result)),
    };
    compared.unshift(contextRow('bare node:http 302, no database (context)', [ceilingMeasured]));

    if (redirectsOnly) return { figures: rows, 'redirects against a node:http reference (medians)': compared };
    const before = await settledTotals(db);
    const stats = await measureCpu(
      () => load({ ...base, url: service.url, paths: list.slice(0, 1000).map((c) => `/api/links/${c}`) }),
      async () => [service.pid],
    );
    rows.push(row('stats lookups', stats, undefined, { clicks: (await totals(db)).clicks - before.clicks }));

    // The visits report of a busy link: 1,000,000 visits over 90 days, read by a
    // few dashboards at once (the latency, not the rate, is the figure here).
    const busy = list[1]!;
    const seeded = await seedVisits(db, busy, Date.now());
    console.log(
      `shortener: seeded ${seeded.visits} visits in ${seeded.rows} hourly rows and ${seeded.visitors} daily visitors in ${seeded.seconds.toFixed(1)} s`,
    );
    const report = { ...base, connections: REPORT_CONNECTIONS, headers: { authorization: `Bearer ${adminKey}` } };
    const thirtyDays = 'interval=day';
    const lastDay = `interval=hour&from=${new Date(Date.now() - DAY_MS).toISOString()}`;
    for (const [label, query] of [
      ['visits report, 30 days by day, from hourly rows (before the daily rollup)', thirtyDays],
      ['rollup', ''],
      ['visits report, 30 days by day (1M visits over 90 days)', thirtyDays],
      ['visits report, 24 hours by hour (1M visits over 90 days)', lastDay],
    ] as const) {
      if (label === 'rollup') {
        // What the service's own rollup does every 10 minutes, done now rather than waited for.
        const started = Date.now();
        const pool = createPool(databaseUrl, { max: 1 });
        const days = await new LinkService(new LinkRepository(pool), randomCode, () => false, systemClock)
          .rollUpVisits()
          .finally(() => pool.end());
        console.log(`shortener: rolled up ${days} days of visits in ${((Date.now() - started) / 1000).toFixed(1)} s`);
        continue;
      }
      let pgCpu: number | undefined;
      const m = await measureCpu(
        async () => {
          const inner = await measureCpu(
            () => load({ ...report, url: `${service.url}/api/links/${busy}/visits?${query}` }),
            () => backendPids(db, name),
          );
          pgCpu = inner.cpu;
          return inner.result;
        },
        async () => [service.pid],
      );
      rows.push(
        row(label, m, pgCpu, {
          connections: REPORT_CONNECTIONS,
          'other answers':
            Object.entries(m.result.statusCountsWithWarmup)
              .filter(([s]) => s !== '200')
              .map(([s, n]) => `${s}: ${n}`)
              .join(', ') || 'none',
        }),
      );
    }
    return { figures: rows, 'redirects against a node:http reference (medians)': compared };
  } finally {
    await db.end();
    await reference?.stop();
    await ceiling.stop();
    await service.stop();
    await serviceAtInfo.stop();
  }
}
