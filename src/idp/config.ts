import { createPrivateKey } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ConfigError, type ConfigOf, bool, commonVars, connectionUrl, httpUrl, int, str, type VarSpec } from '../kit/config.js';
import { passwordHasherVars } from '../kit/password-hasher.js';
import { mailVars } from '../kit/mail/transport.js';
import { corsOrigins } from './cors.js';

// An opaque Supabase-style key: a fixed prefix, then URL-safe characters. The prefix tells which role
// the key stands for, so a secret key pasted where the publishable one belongs fails at start.
const opaqueKey = (prefix: string): VarSpec<string, true> => ({
  required: true,
  parse: (raw, name) => {
    if (!raw.startsWith(prefix) || !/^[A-Za-z0-9_-]+$/.test(raw.slice(prefix.length)) || raw.length === prefix.length) {
      throw new ConfigError(name, `must look like ${prefix}<letters, digits, _ or ->`);
    }
    return raw;
  },
});

/** A P-256 private key (PEM PKCS#8/SEC1 or a JWK with `d`), checked once here so a bad key stops the start. */
const es256PrivateKey = (): VarSpec<string, false> => ({
  parse: (raw, name) => {
    try {
      const trimmed = raw.trim();
      const key = trimmed.startsWith('{')
        ? createPrivateKey({ key: JSON.parse(trimmed) as import('node:crypto').JsonWebKey, format: 'jwk' })
        : createPrivateKey(trimmed);
      if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') throw new Error('not P-256');
    } catch {
      throw new ConfigError(name, 'must be an ES256 (EC P-256) private key, as PEM or as a JWK with "d"');
    }
    return raw.trim();
  },
});

/** A comma-separated list of absolute http(s) URLs, each possibly with `*`/`**` wildcards. */
const redirectList = (): VarSpec<string[], true> => ({
  default: [],
  parse: (raw, name) => {
    const items = raw.split(',').map((item) => item.trim()).filter((item) => item !== '');
    for (const item of items) {
      if (!/^https?:\/\/[^/\s]+/.test(item)) throw new ConfigError(name, `must be a comma-separated list of http(s) URLs, got "${item}"`);
    }
    return items;
  },
});

export const idpConfig = {
  ...commonVars(54321),
  IDP_PUBLISHABLE_KEY: opaqueKey('sb_publishable_'),
  IDP_SECRET_KEY: opaqueKey('sb_secret_'),
  /** On: signup confirms at once and returns a session (the local Supabase CLI default). */
  IDP_AUTOCONFIRM: bool({ default: true }),
  // supabase-js refreshes before every call when a token has 90 s or less left, so shorter
  // lifetimes would double the traffic.
  IDP_JWT_EXPIRY: int({ default: 3600, min: 120, max: 7 * 24 * 3600 }),
  /**
   * Seconds after a rotation during which the replaced refresh token still gets the current one
   * back (a client that lost the response); later it counts as reuse and ends the session.
   * GoTrue's GOTRUE_SECURITY_REFRESH_TOKEN_REUSE_INTERVAL, same default.
   */
  IDP_REFRESH_TOKEN_REUSE_INTERVAL: int({ default: 10, min: 0, max: 3600 }),
  /** Absent: one is generated and kept under DATA_DIR (all instances must share it; see README). */
  IDP_SIGNING_KEY: es256PrivateKey(),
  /** The public base URL of the idp; access tokens are issued by `<IDP_SITE_URL>/auth/v1`. */
  IDP_SITE_URL: httpUrl({ default: (env: Record<string, string | undefined>) => `http://127.0.0.1:${env.PORT || 54321}` }),
  /**
   * The app's URL (GoTrue's SITE_URL): where a mail's link leads after /verify when the request
   * named no allowed redirect_to; any URL on its host is allowed.
   */
  IDP_APP_URL: httpUrl({ default: (env: Record<string, string | undefined>) => env.IDP_SITE_URL || `http://127.0.0.1:${env.PORT || 54321}` }),
  /** More URLs a redirect_to may name (GoTrue's URI_ALLOW_LIST): comma-separated, `*` and `**` globs. */
  IDP_REDIRECT_URLS: redirectList(),
  /** Seconds a mailed link or code stays valid (GoTrue's MAILER_OTP_EXP, same default: 24 h). */
  IDP_MAILER_OTP_EXP: int({ default: 86400, min: 60, max: 7 * 24 * 3600 }),
  /** Seconds between two mails to one address (GoTrue's SMTP_MAX_FREQUENCY, same default). */
  IDP_SMTP_MAX_FREQUENCY: int({ default: 60, min: 1, max: 24 * 3600 }),
  // SMTP_URL (unset: mails are dropped, as GoTrue without an SMTP host, with a warning at start) and MAIL_FROM.
  ...mailVars('Supabase Auth <noreply@localhost>'),
  /** Origins browsers may call the idp from: `*` (the default, as the Supabase CLI's gateway) or a comma-separated list. */
  IDP_CORS_ORIGINS: corsOrigins(),
  /** The app migrations applied after the idp's own, like `supabase start` does. */
  IDP_MIGRATIONS_DIR: str({ default: fileURLToPath(new URL('../../supabase/migrations', import.meta.url)) }),
  /** Rate-limit counters shared by every instance; unset: counted in this process only. */
  REDIS_URL: connectionUrl(['redis:', 'rediss:']),
  // Supabase Auth's own limits, under GoTrue's names (GOTRUE_RATE_LIMIT_*), per client address
  // (request.ip: X-Forwarded-For is believed only from TRUST_PROXY, which stands in for GoTrue's
  // GOTRUE_RATE_LIMIT_HEADER). GoTrue refills a token bucket; here each is a fixed window.
  /** POST /token, password and refresh_token grants alike: requests per 5 minutes per address. */
  IDP_RATE_LIMIT_TOKEN_REFRESH: int({ default: 150, min: 1, max: 1_000_000 }),
  /** POST /signup with an email (GoTrue counts it under its OTP limit): requests per 5 minutes per address. */
  IDP_RATE_LIMIT_OTP: int({ default: 30, min: 1, max: 1_000_000 }),
  /** Confirmation emails per hour for the whole service (not per address); 0 refuses every one, as in GoTrue. */
  IDP_RATE_LIMIT_EMAIL_SENT: int({ default: 30, min: 0, max: 1_000_000 }),
  /** POST and GET /verify per address per 5 minutes (GoTrue's RATE_LIMIT_VERIFY): bounds guessing of mailed codes. */
  IDP_RATE_LIMIT_VERIFY: int({ default: 30, min: 1, max: 1_000_000 }),
  /** Not in GoTrue: failed password sign-ins per account (email address) per 15 minutes. */
  IDP_RATE_LIMIT_LOGIN_FAILURES: int({ default: 10, min: 1, max: 1_000_000 }),
  // 128 cost-10 jobs are about 5 s of work for 2 cores, as the accounts default is at cost 12.
  ...passwordHasherVars(128),
};

export type IdpConfig = ConfigOf<typeof idpConfig>;
