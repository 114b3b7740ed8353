import { type ConfigOf, commonVars, connectionUrl, httpUrl, str } from '../kit/config.js';

export const shortenerConfig = {
  ...commonVars(3001),
  /** Prefix of every short_url; the service's own address unless it runs behind another name. */
  BASE_URL: httpUrl({ default: (env: Record<string, string | undefined>) => `http://localhost:${env.PORT || 3001}` }),
  /** When set, rate-limit counters live in Redis and are shared by every instance. */
  REDIS_URL: connectionUrl(['redis:', 'rediss:']),
  /** Bearer key of the admin API (/api/links listing, PATCH, DELETE); unset, those routes answer 503. */
  SHORTENER_ADMIN_KEY: str({ minBytes: 32 }),
};

export type ShortenerConfig = ConfigOf<typeof shortenerConfig>;
