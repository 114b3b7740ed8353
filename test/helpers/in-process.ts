// What the services built in the test process share (buildShortener, buildAccounts): a pool on the
// caller's database or on one of their own, their log lines captured, real HTTP when asked for,
// and one close for all of it.
import { type Pool, createPool } from '../../src/kit/db.js';
import type { App } from '../../src/kit/http.js';
import type { TestDatabase } from './database.js';
import type { LogCapture } from './logs.js';

export interface InProcessService {
  app: App;
  /** The given pool, or one on a database of its own (dropped by close). */
  pool: Pool;
  /** Where it listens; only with `listen`. */
  url: string;
  /** Every line it logs (at LOG_LEVEL, silent unless its env says otherwise). */
  logs: LogCapture;
  close(): Promise<void>;
}

export async function inProcessService(opts: {
  pool: Pool | undefined;
  database: () => Promise<TestDatabase>;
  listen: boolean;
  logs: LogCapture;
  build: (pool: Pool) => Promise<App>;
}): Promise<InProcessService> {
  const db = opts.pool ? undefined : await opts.database();
  const pool = opts.pool ?? createPool(db!.url, { max: 5 });
  let app: App;
  try {
    app = await opts.build(pool);
  } catch (err) {
    if (db) await Promise.all([pool.end(), db.drop()]).catch(() => {});
    throw err;
  }
  const url = opts.listen ? await app.listen({ port: 0, host: '127.0.0.1' }) : '';
  return {
    app,
    pool,
    url,
    logs: opts.logs,
    async close() {
      await app.close();
      if (db) {
        await pool.end();
        await db.drop();
      }
    },
  };
}
