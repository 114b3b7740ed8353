// Typed configuration: each service declares its variables once; values are
// parsed and validated in one place, and nothing else reads process.env.

import { DEFAULT_IPV6_PREFIX, DEFAULT_IPV6_WIDE_PREFIX } from './http/client-ip.js';
import { DEFAULT_HTTP_LIMITS, defaultMaxConnections } from './http/limits.js';

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable} ${problem}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** `present` records at type level whether the value can be undefined after loading. */
export interface VarSpec<T, P extends boolean = boolean> {
  parse: (raw: string, name: string) => T;
  default?: T | ((env: Env) => T);
  required?: boolean;
  readonly present?: P;
}

interface Opts<T> {
  required?: boolean;
  default?: T | ((env: Env) => T);
}

type Present<O> = O extends { required: true } ? true : O extends { default: infer D } ? (undefined extends D ? false : true) : false;

export type ConfigShape = Record<string, VarSpec<unknown>>;

export type ConfigOf<S extends ConfigShape> = {
  [K in keyof S]: S[K] extends VarSpec<infer T, infer P> ? (P extends true ? T : T | undefined) : never;
};

function spec<T, O extends Opts<T>>(opts: O, parse: (raw: string, name: string) => T): VarSpec<T, Present<O>> {
  return { required: opts.required, default: opts.default, parse } as VarSpec<T, Present<O>>;
}

export const str = <O extends Opts<string> & { minBytes?: number }>(opts: O = {} as O) =>
  spec<string, O>(opts, (raw, name) => {
    if (opts.minBytes !== undefined && Buffer.byteLength(raw) < opts.minBytes) {
      throw new ConfigError(name, `must be at least ${opts.minBytes} bytes long`);
    }
    return raw;
  });

export const int = <O extends Opts<number> & { min?: number; max?: number }>(opts: O = {} as O) =>
  spec<number, O>(opts, (raw, name) => {
    if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got "${raw}"`);
    const value = Number(raw);
    if (opts.min !== undefined && value < opts.min) throw new ConfigError(name, `must be at least ${opts.min}`);
    if (opts.max !== undefined && value > opts.max) throw new ConfigError(name, `must be at most ${opts.max}`);
    return value;
  });

export const bool = <O extends Opts<boolean>>(opts: O = {} as O) =>
  spec<boolean, O>(opts, (raw, name) => {
    if (/^(true|1|yes|on)$/i.test(raw)) return true;
    if (/^(false|0|no|off)$/i.test(raw)) return false;
    throw new ConfigError(name, `must be true or false, got "${raw}"`);
  });

export const oneOf = <T extends string, O extends Opts<T>>(values: readonly T[], opts: O = {} as O) =>
  spec<T, O>(opts, (raw, name) => {
    if (!(values as readonly string[]).includes(raw)) {
      throw new ConfigError(name, `must be one of ${values.join(', ')}, got "${raw}"`);
    }
    return raw as T;
  });

/** An absolute http(s) URL; a trailing slash is dropped so paths can be appended. */
export const httpUrl = <O extends Opts<string>>(opts: O = {} as O) =>
  spec<string, O>(opts, (raw, name) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ConfigError(name, `must be an http(s) URL, got "${raw}"`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      throw new ConfigError(name, `must be an http(s) URL, got "${raw}"`);
    }
    return raw.replace(/\/+$/, '');
  });

const MS_PER_UNIT: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const DURATION = /^(?:\d+(?:ms|s|m|h|d))+$/;
const DURATION_PART = /(\d+)(ms|s|m|h|d)/g;

/**
 * A length of time, as a whole number of `unit` ("ms" or "s"): either a plain whole number in that
 * unit, or numbers with units, `500ms`, `30s`, `15m`, `1h`, `2d`, `1h30m`. The one time convention of
 * every service's variables. Zero, negatives, fractions, spaces, other units, and a value that is not a
 * whole number of the unit are refused rather than guessed at. Undefined when the text is none of these.
 */
export function parseDuration(raw: string, unit: 'ms' | 's'): number | undefined {
  let ms: number;
  if (/^\d+$/.test(raw)) ms = Number(raw) * MS_PER_UNIT[unit]!;
  else if (DURATION.test(raw)) ms = [...raw.matchAll(DURATION_PART)].reduce((sum, [, n, u]) => sum + Number(n) * MS_PER_UNIT[u!]!, 0);
  else return undefined;
  const value = ms / MS_PER_UNIT[unit]!;
  return Number.isSafeInteger(value) && value > 0 ? value : undefined;
}

/**
 * A duration variable (parseDuration), loaded as a whole number of `unit`. `off: true` also takes 0,
 * meaning the thing it times is turned off.
 */
export const duration = <O extends Opts<number> & { unit: 'ms' | 's'; min?: number; max?: number; off?: boolean }>(opts: O) =>
  spec<number, O>(opts, (raw, name) => {
    if (opts.off && raw === '0') return 0;
    const value = parseDuration(raw, opts.unit);
    const example = opts.unit === 'ms' ? '500ms, 30s, 2m or plain milliseconds' : '30s, 15m, 1h, 2d or plain seconds';
    if (value === undefined) throw new ConfigError(name, `must be a duration such as ${example}, got "${raw}"`);
    if (opts.min !== undefined && value < opts.min) throw new ConfigError(name, `must be at least ${opts.min}${opts.unit}`);
    if (opts.max !== undefined && value > opts.max) throw new ConfigError(name, `must be at most ${opts.max}${opts.unit}`);
    return value;
  });

/** A connection string for PostgreSQL or Redis; never echoed back because it may hold a password. */
export const connectionUrl = <O extends Opts<string>>(protocols: string[], opts: O = {} as O) =>
  spec<string, O>(opts, (raw, name) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new ConfigError(name, 'is not a valid URL');
    }
    if (!protocols.includes(url.protocol)) {
      throw new ConfigError(name, `must start with ${protocols.map((p) => `${p}//`).join(' or ')}`);
    }
    return raw;
  });

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * How long and how many connections a service's HTTP server holds, and whether
 * it sends HSTS. Every service reads these (buildHttpApp applies them).
 */
export const httpVars = () => ({
  /** Deadline for a request's header section, from its first byte; a slower client gets 408 and is closed. */
  HTTP_HEADERS_TIMEOUT_MS: duration({ unit: 'ms', default: DEFAULT_HTTP_LIMITS.headersTimeoutMs, min: 1000, max: 600_000 }),
  /** Deadline for a whole request, headers and body; a stalled body gets 408 and the connection is closed. */
  HTTP_REQUEST_TIMEOUT_MS: duration({ unit: 'ms', default: DEFAULT_HTTP_LIMITS.requestTimeoutMs, min: 1000, max: 3_600_000 }),
  /** How long an idle keep-alive connection stays open; above common load balancers' 60 s, so they close first. */
  HTTP_KEEP_ALIVE_TIMEOUT_MS: duration({ unit: 'ms', default: DEFAULT_HTTP_LIMITS.keepAliveTimeoutMs, min: 1000, max: 600_000 }),
  /** Open connections per process; beyond them a new connection is answered 503 and closed. */
  HTTP_MAX_CONNECTIONS: int({ default: () => defaultMaxConnections(), min: 1, max: 1_000_000 }),
  /** Open connections one client (IPv4 address, IPv6 /64) may hold; 0: a quarter of HTTP_MAX_CONNECTIONS. TRUST_PROXY proxies are exempt. */
  HTTP_MAX_CONNECTIONS_PER_CLIENT: int({ default: 0, min: 0, max: 1_000_000 }),
  /** Deadline for the body of a request without credentials (no Authorization or apikey header), from the end of its headers. */
  HTTP_PUBLIC_BODY_TIMEOUT_MS: duration({ unit: 'ms', default: DEFAULT_HTTP_LIMITS.publicBodyTimeoutMs, min: 1000, max: 3_600_000 }),
  /** Strict-Transport-Security max-age in seconds; 0 (the default) sends no HSTS header. */
  HSTS_MAX_AGE: int({ default: 0, min: 0, max: 63_072_000 }),
  /**
   * For tests (npm test turns it on): every answer of a documented route is checked against the
   * service's OpenAPI document, and one that does not match becomes a 500 naming the mismatch.
   */
  OPENAPI_RESPONSE_CHECK: bool({ default: false }),
});

/** Variables every service has. */
export const commonVars = (defaultPort: number) => ({
  PORT: int({ default: defaultPort, min: 0, max: 65535 }),
  HOST: str({ default: '0.0.0.0' }),
  DATABASE_URL: connectionUrl(['postgres:', 'postgresql:']),
  /**
   * False behind a transaction pooler that does not keep prepared statements across server
   * connections (PgBouncer before 1.21, or with max_prepared_statements = 0): statements are
   * then sent unnamed. True keeps the hot queries parsed once per connection.
   */
  DATABASE_NAMED_STATEMENTS: bool({ default: true }),
  DATA_DIR: str({ default: './data' }),
  LOG_LEVEL: oneOf(LOG_LEVELS, { default: 'info' }),
  TRUST_PROXY: str(),
  /** IPv6 clients are rate limited per network of this many leading bits (a customer's /64). */
  RATE_LIMIT_IPV6_PREFIX: int({ default: DEFAULT_IPV6_PREFIX, min: 1, max: 128 }),
  /**
   * ...and per network of this many leading bits too (a site's /48 or /56), with 16 times the
   * limit: a client rotating through its site's /64s is still one client. Not shorter than 16 bits;
   * equal to or longer than RATE_LIMIT_IPV6_PREFIX: one level only.
   */
  RATE_LIMIT_IPV6_WIDE_PREFIX: int({ default: DEFAULT_IPV6_WIDE_PREFIX, min: 16, max: 128 }),
  /** When set, GET /metrics needs `Authorization: Bearer <token>`; unset, it answers loopback clients only. */
  METRICS_TOKEN: str({ minBytes: 16 }),
  ...httpVars(),
});

/**
 * Parses env against the shape. Every problem is collected so one start shows
 * them all; the first line of the error names the first variable.
 */
export function loadConfig<S extends ConfigShape>(shape: S, env: Env): ConfigOf<S> {
  const out: Record<string, unknown> = {};
  const problems: ConfigError[] = [];
  for (const [name, spec] of Object.entries(shape)) {
    const raw = env[name];
    try {
      if (raw === undefined || raw === '') {
        if (spec.default !== undefined) {
          out[name] = typeof spec.default === 'function' ? (spec.default as (e: Env) => unknown)(env) : spec.default;
        } else if (spec.required) {
          throw new ConfigError(name, 'is required but not set');
        } else {
          out[name] = undefined;
        }
      } else {
        out[name] = spec.parse(raw, name);
      }
    } catch (err) {
      if (err instanceof ConfigError) problems.push(err);
      else throw err;
    }
  }
  if (problems.length > 0) throw new ConfigErrors(problems);
  return out as ConfigOf<S>;
}

export class ConfigErrors extends Error {
  constructor(readonly problems: ConfigError[]) {
    super(problems.map((p) => p.message).join('; '));
    this.name = 'ConfigErrors';
  }
}

/** For process entry points: one line per bad variable on stderr, exit code 1. */
export function loadConfigOrExit<S extends ConfigShape>(shape: S, env: Env = process.env): ConfigOf<S> {
  try {
    return loadConfig(shape, env);
  } catch (err) {
    if (err instanceof ConfigErrors) {
      for (const p of err.problems) process.stderr.write(`config error: ${p.message}\n`);
      process.exit(1);
    }
    throw err;
  }
}
