import { type ConfigOf, commonVars, connectionUrl, httpUrl, int, str } from '../kit/config.js';
import { passwordHasherVars } from '../kit/password-hasher.js';

export const shortenerConfig = {
  ...commonVars(3001),
  /** Prefix of every short_url; the service's own address unless it runs behind another name. */
  BASE_URL: httpUrl({ default: (env: Record<string, string | undefined>) => `http://127.0.0.1:${env.PORT || 3001}` }),
  /** When set, rate-limit counters live in Redis and are shared by every instance. */
  REDIS_URL: connectionUrl(['redis:', 'rediss:']),
  /** Bearer key of the admin API (/api/links listing, PATCH, DELETE); unset, those routes answer 503. */
  SHORTENER_ADMIN_KEY: str({ minBytes: 32 }),
  /** Links each API key (and the admin key) may create per hour, single and bulk creates together. */
  KEY_CREATE_PER_HOUR: int({ default: 10_000, min: 1, max: 10_000_000 }),
  /** Link-password hashes and checks waiting for a worker (bcrypt cost 10, ~60 ms each); one more is a 503. */
  ...passwordHasherVars(32),
};

export type ShortenerConfig = ConfigOf<typeof shortenerConfig>;
