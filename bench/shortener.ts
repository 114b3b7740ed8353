import pg from 'pg';
import { ensureDatabase, withDatabase } from '../src/kit/db.js';
import { randomCode } from '../src/shortener/codes.js';
import { type LoadResult, load, ratio, startCeiling, startService } from './lib.js';

// Redirects to one hot code, redirects spread over 10,000 codes, and stats
// lookups, each beside a bare node:http 302 server measured in the same run.
// After each redirect run the clicks stored must equal the 302s received.

const CODES = 10_000;

async function totalClicks(db: pg.Client): Promise<number> {
  const { rows } = await db.query<{ n: string }>('SELECT coalesce(sum(clicks), 0)::bigint AS n FROM links');
  return Number(rows[0]!.n);
}

export async function run(ctx: { adminUrl: string }): Promise<Array<Record<string, string | number>>> {
  const name = 'bench_shortener';
  const admin = new pg.Client({ connectionString: ctx.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.end();
  await ensureDatabase(ctx.adminUrl, name);
  const databaseUrl = withDatabase(ctx.adminUrl, name);

  const service = await startService('src/shortener/server.ts', { DATABASE_URL: databaseUrl });
  const ceiling = await startCeiling('redirect');
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    // Seeded straight into the table: the create endpoint is rate limited.
    const codes = new Set<string>();
    while (codes.size < CODES) codes.add(randomCode());
    const list = [...codes];
    await db.query('INSERT INTO links (code, original_url) SELECT c, $2 || c FROM unnest($1::text[]) AS c', [list, 'https://example.com/page/']);
    const hot = list[0]!;

    const base = { connections: 50, durationSeconds: 10, warmupSeconds: 2 };
    const rows: Array<Record<string, string | number>> = [];
    const ceilingRun = await load({ ...base, url: `${ceiling.url}/${hot}` });
    const row = (label: string, r: LoadResult, extra: Record<string, string | number> = {}) => ({
      run: label,
      'req/s': Math.round(r.rps),
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      'vs ceiling': `${(ratio(r.rps, ceilingRun.rps) * 100).toFixed(0)}%`,
      ...extra,
    });
    rows.push(row('bare node:http 302 (ceiling)', ceilingRun));

    for (const [label, paths] of [
      ['redirect, one hot code', [`/${hot}`]],
      ['redirect, 10,000 codes', list.map((c) => `/${c}`)],
    ] as const) {
      const before = await totalClicks(db);
      const r = await load({ ...base, exactCount: true, url: service.url, paths: [...paths] });
      const counted = (await totalClicks(db)) - before;
      const redirects = r.statusCountsWithWarmup['302'] ?? 0;
      rows.push(row(label, r, { '302s': redirects, 'clicks counted': counted, 'clicks = 302s': counted === redirects ? 'yes' : 'NO' }));
    }

    const before = await totalClicks(db);
    const stats = await load({ ...base, url: service.url, paths: list.slice(0, 1000).map((c) => `/api/links/${c}`) });
    rows.push(row('stats lookups', stats, { 'clicks added': (await totalClicks(db)) - before }));
    return rows;
  } finally {
    await db.end();
    await ceiling.stop();
    await service.stop();
  }
}
