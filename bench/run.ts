// `npm run bench [service ...]`: every benchmark, or the ones named, on one
// PostgreSQL, printing tables of figures measured side by side in this run.
import { cpus } from 'node:os';
import { printTable, startBenchDatabase } from './lib.js';

const all = ['shortener', 'accounts', 'notes', 'idp-rest', 'logging'];
const chosen = process.argv.slice(2).length > 0 ? process.argv.slice(2) : all;

console.log(`# Benchmarks (${cpus().length} cores, Node ${process.version}, ${new Date().toISOString()})`);
const db = await startBenchDatabase();
let failed = false;
try {
  for (const name of chosen) {
    // A bench answers one table, or several by title (its figures, then its paths against their references).
    type Rows = Array<Record<string, string | number>>;
    const mod = (await import(`./${name}.js`)) as { run(ctx: { adminUrl: string }): Promise<Rows | Record<string, Rows>> };
    try {
      const result = await mod.run({ adminUrl: db.adminUrl });
      if (Array.isArray(result)) printTable(name, result);
      else for (const [title, rows] of Object.entries(result)) printTable(`${name}: ${title}`, rows);
    } catch (err) {
      failed = true;
      console.error(`${name} benchmark failed: ${(err as Error).stack ?? String(err)}`);
    }
  }
} finally {
  await db.stop();
}
process.exit(failed ? 1 : 0);
