import { fileURLToPath } from 'node:url';
import { loadConfigOrExit } from '../kit/config.js';
import { createPool, migrate, readMigrations } from '../kit/db.js';
import { awaitRedisAtStart, connectRedis } from '../kit/redis.js';
import { runService } from '../kit/service.js';
import { buildApp } from './app.js';
import { shortenerConfig } from './config.js';

const config = loadConfigOrExit(shortenerConfig);

await runService('shortener', config, async ({ databaseUrl, log }) => {
  const pool = createPool(databaseUrl, { max: 20, applicationName: 'shortener', namedStatements: config.DATABASE_NAMED_STATEMENTS });
  await migrate(pool, 'shortener', await readMigrations(fileURLToPath(new URL('./migrations', import.meta.url))));
  const redis = config.REDIS_URL ? connectRedis(config.REDIS_URL, (err) => log.warn(`redis: ${err.message}`)) : undefined;
  if (redis) await awaitRedisAtStart(redis, log);
  const app = await buildApp(config, { pool, redis });
  return {
    app,
    close: async () => {
      await pool.end();
      redis?.disconnect();
    },
  };
});
