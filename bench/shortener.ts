import pg from 'pg';
import { ensureDatabase, withDatabase } from '../src/kit/db.js';
import { randomCode } from '../src/shortener/codes.js';
import { type LoadOptions, type LoadResult, cpuSeconds, defaultGenerator, load, ratio, startCeiling, startService } from './lib.js';

// Redirects to one hot code, redirects spread over 10,000 codes, and stats
// lookups, each beside a bare node:http 302 server measured in the same run.
// Redirects carry a realistic mix of User-Agents (people, link previews,
// crawlers) and referrers, so every click records its visit with analytics on.
// After each redirect run the clicks stored must equal the visits stored and
// the 302s received. Beside each rate: CPU time per request of the service's
// process and of its PostgreSQL backends, read from /proc/<pid>/stat.
// BENCH_SECONDS (default 10) sets the measured duration of each run.

const CODES = 10_000;
const DURATION_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);

// Weights are roughly what a public short link sees: mostly people, then previews and crawlers.
const AGENTS: Array<[string, number]> = [
  ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36', 14],
  ['Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1', 14],
  ['Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.144 Mobile Safari/537.36', 10],
  ['Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.2 Safari/605.1.15', 6],
  ['Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0', 4],
  ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 Edg/120.0.0.0', 4],
  ['Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 Instagram 309.0.0.28.111', 3],
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
  const { rows } = await db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
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

const answered = (r: LoadResult) => Object.values(r.statusCountsWithWarmup).reduce((a, b) => a + b, 0);
const microsPerRequest = (cpu: number | undefined, r: LoadResult) => (cpu === undefined ? 'n/a' : Math.round((cpu * 1e6) / Math.max(1, answered(r))));

export async function run(ctx: { adminUrl: string }): Promise<Array<Record<string, string | number>>> {
  const name = 'bench_shortener';
  const admin = new pg.Client({ connectionString: ctx.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  await ensureDatabase(ctx.adminUrl, name);
  const databaseUrl = withDatabase(ctx.adminUrl, name);

  // TRUST_PROXY: each simulated visitor's address arrives in X-Forwarded-For, as behind a load balancer.
  const service = await startService('src/shortener/server.ts', { DATABASE_URL: databaseUrl, TRUST_PROXY: '127.0.0.1' });
  const ceiling = await startCeiling('redirect');
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  const generator = defaultGenerator();
  console.log(`shortener: load generator ${generator}${generator === 'wrk' ? ' (timed runs)' : ' (autocannon; fixed-count runs)'}`);
  try {
    // Seeded straight into the table: the create endpoint is rate limited.
    const codes = new Set<string>();
    while (codes.size < CODES) codes.add(randomCode());
    const list = [...codes];
    await db.query('INSERT INTO links (code, original_url) SELECT c, $2 || c FROM unnest($1::text[]) AS c', [list, 'https://example.com/page/']);
    const hot = list[0]!;

    const base: Omit<LoadOptions, 'url'> = { connections: 50, durationSeconds: DURATION_SECONDS, warmupSeconds: 2, generator };
    const headerSets = visitorHeaders();
    const rows: Array<Record<string, string | number>> = [];
    const ceilingRun = await measureCpu(() => load({ ...base, url: `${ceiling.url}/${hot}`, headerSets }), async () => [ceiling.pid]);
    const row = (label: string, m: { result: LoadResult; cpu: number | undefined }, pgCpu: number | undefined, extra: Record<string, string | number> = {}) => ({
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

    for (const [label, paths] of [
      ['redirect, one hot code, analytics on', [`/${hot}`]],
      ['redirect, 10,000 codes, analytics on', list.map((c) => `/${c}`)],
    ] as const) {
      const before = await totals(db);
      let pgCpu: number | undefined;
      const m = await measureCpu(async () => {
        const inner = await measureCpu(
          () => load({ ...base, exactCount: true, url: service.url, paths: [...paths], headerSets }),
          () => backendPids(db, name),
        );
        pgCpu = inner.cpu;
        return inner.result;
      }, async () => [service.pid]);
      const after = await settledTotals(db);
      const clicks = after.clicks - before.clicks;
      const visits = after.visits - before.visits;
      const redirects = m.result.statusCountsWithWarmup['302'] ?? 0;
      // autocannon runs a fixed count, so every answer is received: exact. wrk stops on time and
      // drops the answers in flight, which the service still counted: at most one per connection.
      const exact = clicks === visits && (generator === 'autocannon' ? clicks === redirects : clicks >= redirects && clicks - redirects <= 2 * base.connections!);
      const others = Object.entries(m.result.statusCountsWithWarmup).filter(([status]) => status !== '302');
      rows.push(row(label, m, pgCpu, { '302s': redirects, 'other answers': others.map(([s, n]) => `${s}: ${n}`).join(', ') || 'none', 'socket errors': m.result.errors, clicks, visits, 'clicks = visits = 302s': exact ? (clicks === redirects ? 'yes' : `yes (+${clicks - redirects} cut at the end)`) : 'NO' }));
    }

    const before = await settledTotals(db);
    const stats = await measureCpu(() => load({ ...base, url: service.url, paths: list.slice(0, 1000).map((c) => `/api/links/${c}`) }), async () => [service.pid]);
    rows.push(row('stats lookups', stats, undefined, { clicks: (await totals(db)).clicks - before.clicks }));
    return rows;
  } finally {
    await db.end();
    await ceiling.stop();
    await service.stop();
  }
}
