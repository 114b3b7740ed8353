import { fileURLToPath } from 'node:url';
import { loadConfigOrExit } from '../kit/config.js';
import { createPool, migrate, readMigrations } from '../kit/db.js';
import { awaitRedisAtStart, connectRedis } from '../kit/redis.js';
import { runService } from '../kit/service.js';
import { seedAdmin } from './admin-seed.js';
import { buildApp } from './app.js';
import { accountsConfig } from './config.js';
import { UsersRepository } from './repository.js';

const config = loadConfigOrExit(accountsConfig);

await runService('accounts', config, async ({ databaseUrl, log }) => {
  const pool = createPool(databaseUrl, { max: 20, applicationName: 'accounts', namedStatements: config.DATABASE_NAMED_STATEMENTS });
  const redis = config.REDIS_URL ? connectRedis(config.REDIS_URL, (err) => log.warn(`redis: ${err.message}`)) : undefined;
  if (redis) await awaitRedisAtStart(redis, log);
  const close = async () => {
    await pool.end();
    redis?.disconnect();
  };
  try {
    await migrate(pool, 'accounts', await readMigrations(fileURLToPath(new URL('./migrations', import.meta.url))));
    await seedAdmin(new UsersRepository(pool), config, log);
    const app = await buildApp(config, { pool, redis });
    return { app, close };
  } catch (err) {
    await close().catch(() => {});
    throw err;
  }
});
