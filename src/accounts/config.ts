import { type ConfigOf, ConfigError, type VarSpec, commonVars, connectionUrl, int, str } from '../kit/config.js';
import { passwordHasherVars } from '../kit/password-hasher.js';
import { emailProblem, normalizeEmail, passwordProblem } from './validation.js';

const DURATION = /^(\d+)([smhd]?)$/;
const SECONDS_PER_UNIT: Record<string, number> = { '': 1, s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * `30s`, `15m`, `1h`, `2d` or plain seconds (`3600`), as whole seconds.
 * Zero, negatives, fractions, spaces and other units are refused rather than
 * guessed at: a token lifetime is worth getting exactly right.
 */
export function parseDuration(raw: string): number | undefined {
  const match = DURATION.exec(raw);
  if (!match) return undefined;
  const seconds = Number(match[1]) * (SECONDS_PER_UNIT[match[2] ?? ''] ?? Number.NaN);
  return Number.isSafeInteger(seconds) && seconds > 0 ? seconds : undefined;
}

/** A duration variable, loaded as whole seconds. */
function duration(defaultSeconds: number): VarSpec<number, true> {
  return {
    default: defaultSeconds,
    parse: (raw, name) => {
      const seconds = parseDuration(raw);
      if (seconds === undefined) {
        throw new ConfigError(name, `must be a duration such as 30s, 15m, 1h, 2d or plain seconds, got "${raw}"`);
      }
      return seconds;
    },
  } as VarSpec<number, true>;
}

/** An optional variable checked with one of the account rules, so a bad admin never gets as far as the database. */
function checked(rule: (value: string) => string | undefined, normalize: (raw: string) => string = (raw) => raw): VarSpec<string, false> {
  return {
    parse: (raw, name) => {
      const value = normalize(raw);
      const problem = rule(value);
      if (problem) throw new ConfigError(name, problem);
      return value;
    },
  } as VarSpec<string, false>;
}

export const accountsConfig = {
  ...commonVars(3000),
  /** HS256 key of the access tokens; 32 bytes is the size of the SHA-256 output, the minimum that does not weaken HMAC. */
  JWT_SECRET: str({ required: true, minBytes: 32 }),
  /** Lifetime of an access token, in seconds once loaded. */
  JWT_EXPIRES_IN: duration(3600),
  /** The admin account created at start when both are set; never a default password. */
  ADMIN_EMAIL: checked(emailProblem, normalizeEmail),
  ADMIN_PASSWORD: checked(passwordProblem),
  /** When set, login-failure and registration counters live in Redis and are shared by every instance. */
  REDIS_URL: connectionUrl(['redis:', 'rediss:']),
  /** Registrations allowed per client IP per REGISTER_WINDOW (each costs a cost-12 bcrypt hash). */
  REGISTER_MAX_PER_IP: int({ default: 10, min: 1 }),
  REGISTER_WINDOW: duration(3600),
  // 32 cost-12 jobs are about 5 s of work for 2 cores.
  ...passwordHasherVars(32),
};

export type AccountsConfig = ConfigOf<typeof accountsConfig>;
