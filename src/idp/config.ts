import { fileURLToPath } from 'node:url';
import { ConfigError, type ConfigOf, bool, commonVars, connectionUrl, httpUrl, int, oneOf, str, type VarSpec } from '../kit/config.js';
import { passwordHasherVars } from '../kit/password-hasher.js';
import { es256PrivateKey } from '../kit/es256-keys.js';
import { mailVars } from '../kit/mail/transport.js';
import { linkTemplateProblem } from './auth/mails.js';
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

/** A comma-separated list of absolute http(s) URLs, each possibly with `*`/`**` wildcards. */
const redirectList = (): VarSpec<string[], true> => ({
  default: [],
  parse: (raw, name) => {
    const items = raw
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
    for (const item of items) {
      if (!/^https?:\/\/[^/\s]+/.test(item)) throw new ConfigError(name, `must be a comma-separated list of http(s) URLs, got "${item}"`);
    }
    return items;
  },
});

/**
 * The schemas REST exposes (PostgREST's db-schemas): comma-separated, the first is the default and
 * the others are chosen with Accept-Profile / Content-Profile. The idp's own `auth` schema and
 * PostgreSQL's catalogs cannot be exposed.
 */
const restSchemas = (): VarSpec<string[], true> => ({
  default: ['public'],
  parse: (raw, name) => {
    const schemas = [...new Set(raw.split(',').map((s) => s.trim()))];
    for (const schema of schemas) {
      if (!/^[A-Za-z_][A-Za-z0-9_$]*$/.test(schema)) throw new ConfigError(name, `must list schema names, got "${schema}"`);
      if (schema === 'auth' || schema === 'information_schema' || schema.startsWith('pg_')) {
        throw new ConfigError(name, `cannot expose the schema ${schema}`);
      }
    }
    return schemas;
  },
});

/** A mail's link template (GoTrue's custom templates' href): checked at start, unset for GET /verify. */
const linkTemplate = (): VarSpec<string, false> => ({
  parse: (raw, name) => {
    const problem = linkTemplateProblem(raw.trim());
    if (problem) throw new ConfigError(name, problem);
    return raw.trim();
  },
});

export const idpConfig = {
  ...commonVars(54321),
  IDP_PUBLISHABLE_KEY: opaqueKey('sb_publishable_'),
  IDP_SECRET_KEY: opaqueKey('sb_secret_'),
  /**
   * On: signup confirms at once and returns a session (the local Supabase CLI's setting, which
   * `npm start` uses). Off by default, as on a hosted Supabase project: an address is confirmed by mail.
   */
  IDP_AUTOCONFIRM: bool({ default: false }),
  /**
   * GoTrue's DISABLE_SIGNUP: POST /signup (email and anonymous alike) is refused; the admin API,
   * invitations and generate_link still create users, as in GoTrue.
   */
  IDP_DISABLE_SIGNUP: bool({ default: false }),
  /**
   * GoTrue's EXTERNAL_ANONYMOUS_USERS_ENABLED: POST /signup without email or phone signs in a new
   * anonymous user (supabase-js signInAnonymously). Off by default, as GoTrue's and a hosted
   * project's: every call makes a user row.
   */
  IDP_EXTERNAL_ANONYMOUS_USERS_ENABLED: bool({ default: false }),
  /**
   * GoTrue's SECURITY_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION: a password change from a session
   * older than a day needs the nonce GET /reauthenticate mails. On by default here: a stolen access
   * token alone must not be enough to take the password.
   */
  IDP_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION: bool({ default: true }),
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
  IDP_APP_URL: httpUrl({
    default: (env: Record<string, string | undefined>) => env.IDP_SITE_URL || `http://127.0.0.1:${env.PORT || 54321}`,
  }),
  /** More URLs a redirect_to may name (GoTrue's URI_ALLOW_LIST): comma-separated, `*` and `**` globs. */
  IDP_REDIRECT_URLS: redirectList(),
  /** Seconds a mailed link or code stays valid (GoTrue's MAILER_OTP_EXP; 1 h, as a hosted Supabase project's). */
  IDP_MAILER_OTP_EXP: int({ default: 3600, min: 60, max: 7 * 24 * 3600 }),
  /** Codes that may be tried against one mailed token; after them it is voided, even for its right code. */
  IDP_OTP_MAX_ATTEMPTS: int({ default: 5, min: 1, max: 1000 }),
  /** Codes that may be tried for one address per hour, across the tokens mailed to it (429 beyond). */
  IDP_OTP_MAX_ATTEMPTS_PER_ACCOUNT: int({ default: 15, min: 1, max: 100_000 }),
  /** Seconds between two mails to one address (GoTrue's SMTP_MAX_FREQUENCY, same default). */
  IDP_SMTP_MAX_FREQUENCY: int({ default: 60, min: 1, max: 24 * 3600 }),
  // SMTP_URL (unset: mails are dropped, as GoTrue without an SMTP host, with a warning at start) and MAIL_FROM.
  ...mailVars('Supabase Auth <noreply@localhost>'),
  /** The product the mails speak for ("Reset your Notes password"); unset: GoTrue's default wording. */
  IDP_MAILER_SITE_NAME: str({ default: '' }),
  /** Whether a mail offers the six-digit code besides its link (GoTrue's default templates do). */
  IDP_MAILER_OFFER_CODE: bool({ default: true }),
  // Per kind, the mail's link (the href of GoTrue's custom templates), with GoTrue's placeholders
  // {{ .SiteURL }} (IDP_APP_URL), {{ .TokenHash }}, {{ .Token }}, {{ .RedirectTo }}, {{ .Email }},
  // {{ .ConfirmationURL }}. Unset: the idp's GET /verify link, which uses the token up when opened.
  // Supabase's advice for links that mail scanners open: the app's own page, which sends the token
  // hash to POST /verify when the person confirms, e.g.
  // {{ .SiteURL }}/reset-password?token_hash={{ .TokenHash }}&type=recovery
  IDP_MAILER_LINK_SIGNUP: linkTemplate(),
  IDP_MAILER_LINK_INVITE: linkTemplate(),
  IDP_MAILER_LINK_RECOVERY: linkTemplate(),
  IDP_MAILER_LINK_MAGICLINK: linkTemplate(),
  IDP_MAILER_LINK_EMAIL_CHANGE: linkTemplate(),
  /** Origins browsers may call the idp from: `*` (the default, as the Supabase CLI's gateway) or a comma-separated list. */
  IDP_CORS_ORIGINS: corsOrigins(),
  /** The app migrations applied after the idp's own, like `supabase start` does. */
  IDP_MIGRATIONS_DIR: str({ default: fileURLToPath(new URL('../../supabase/migrations', import.meta.url)) }),
  /**
   * When set, X-Forwarded-For is believed only from a request that also carries this value in
   * X-Forwarded-Secret (notes sends it; `npm start` sets it for both), on top of TRUST_PROXY: other
   * local processes cannot name themselves any address.
   */
  IDP_FORWARDED_SECRET: str(),
  /** Rate-limit counters shared by every instance; unset: counted in this process only. */
  REDIS_URL: connectionUrl(['redis:', 'rediss:']),
  // Supabase Auth's own limits, under GoTrue's names (GOTRUE_RATE_LIMIT_*), per client address
  // (request.ip: X-Forwarded-For is believed only from TRUST_PROXY, which stands in for GoTrue's
  // GOTRUE_RATE_LIMIT_HEADER). GoTrue refills a token bucket; here each is a fixed window. The
  // defaults of sign-ups and sign-ins are above GoTrue's (30 and 150): an app's test suite run from one
  // machine (notes' contract: hundreds of users, then their sign-ins) must get its answers, not 429s.
  /** POST /token, password and refresh_token grants alike: requests per 5 minutes per address. */
  IDP_RATE_LIMIT_TOKEN_REFRESH: int({ default: 1800, min: 1, max: 1_000_000 }),
  /** POST /signup with an email (GoTrue counts it under its OTP limit): requests per 5 minutes per address. */
  IDP_RATE_LIMIT_OTP: int({ default: 1000, min: 1, max: 1_000_000 }),
  /** Anonymous sign-ins per address per hour (GoTrue's RATE_LIMIT_ANONYMOUS_USERS, same default). */
  IDP_RATE_LIMIT_ANONYMOUS_USERS: int({ default: 30, min: 1, max: 1_000_000 }),
  /** Confirmation emails per hour for the whole service (not per address); 0 refuses every one, as in GoTrue. */
  IDP_RATE_LIMIT_EMAIL_SENT: int({ default: 30, min: 0, max: 1_000_000 }),
  /** POST and GET /verify per address per 5 minutes (GoTrue's RATE_LIMIT_VERIFY): bounds guessing of mailed codes. */
  IDP_RATE_LIMIT_VERIFY: int({ default: 30, min: 1, max: 1_000_000 }),
  /**
   * Not in GoTrue: failed password sign-ins per account (email address) and client address per
   * 15 minutes; a guess from elsewhere never locks the owner out (docs/idp.md).
   */
  IDP_RATE_LIMIT_LOGIN_FAILURES: int({ default: 10, min: 1, max: 1_000_000 }),
  /** Failed password sign-ins per account from every address together per 15 minutes: a distributed guess. */
  IDP_RATE_LIMIT_LOGIN_FAILURES_PER_ACCOUNT: int({ default: 1000, min: 1, max: 1_000_000 }),
  /** Distinct accounts that may fail password sign-ins from one client address per 15 minutes: a spray. */
  IDP_RATE_LIMIT_LOGIN_ACCOUNTS_PER_ADDRESS: int({ default: 100, min: 1, max: 1_000_000 }),
  /** Not in GoTrue: password updates (PUT /user with a password) per user per hour, counted before hashing. */
  IDP_RATE_LIMIT_PASSWORD_UPDATES: int({ default: 10, min: 1, max: 1_000_000 }),
  /** Not in GoTrue: password updates per client address per hour. */
  IDP_RATE_LIMIT_PASSWORD_UPDATES_PER_IP: int({ default: 60, min: 1, max: 1_000_000 }),
  /** MFA: seconds a challenge may be verified after it was issued (GoTrue's MFA_CHALLENGE_EXPIRY_DURATION). */
  IDP_MFA_CHALLENGE_EXPIRY_DURATION: int({ default: 300, min: 30, max: 24 * 3600 }),
  /** MFA: seconds an unverified factor without a challenge lives (GoTrue's MFA_FACTOR_EXPIRY_DURATION). */
  IDP_MFA_FACTOR_EXPIRY_DURATION: int({ default: 300, min: 30, max: 7 * 24 * 3600 }),
  /** MFA: factors a user may hold, verified or not (GoTrue's MFA_MAX_ENROLLED_FACTORS). */
  IDP_MFA_MAX_ENROLLED_FACTORS: int({ default: 10, min: 1, max: 100 }),
  /** MFA: verified factors a user may hold (GoTrue's MFA_MAX_VERIFIED_FACTORS). */
  IDP_MFA_MAX_VERIFIED_FACTORS: int({ default: 10, min: 1, max: 100 }),
  /** MFA: challenge and verify requests per address per minute, each (GoTrue's MFA_RATE_LIMIT_CHALLENGE_AND_VERIFY). */
  IDP_MFA_RATE_LIMIT_CHALLENGE_AND_VERIFY: int({ default: 15, min: 1, max: 1_000_000 }),
  /** Not in GoTrue: codes tried against one challenge; the last failure voids it. */
  IDP_MFA_MAX_ATTEMPTS_PER_CHALLENGE: int({ default: 5, min: 1, max: 1000 }),
  /** Not in GoTrue: codes tried against one factor per hour, from every address and challenge together. */
  IDP_MFA_MAX_ATTEMPTS_PER_FACTOR: int({ default: 15, min: 1, max: 100_000 }),
  /** Not in GoTrue: codes tried for one user per hour, across their factors. */
  IDP_MFA_MAX_ATTEMPTS_PER_USER: int({ default: 30, min: 1, max: 100_000 }),
  // 128 cost-10 jobs are about 5 s of work for 2 cores, as the accounts default is at cost 12.
  ...passwordHasherVars(128),
  /** REST: the exposed schemas, the first the default (PostgREST's db-schemas). */
  IDP_REST_SCHEMAS: restSchemas(),
  /**
   * REST: how transactions end (PostgREST's db-tx-end): `commit`, `commit-allow-override`,
   * `rollback`, `rollback-allow-override`; with -allow-override a client chooses by `Prefer: tx=`.
   */
  IDP_REST_TX_END: oneOf(['commit', 'commit-allow-override', 'rollback', 'rollback-allow-override'] as const, { default: 'commit' }),
  /** REST: the largest body a write or call may send, in bytes (413 beyond). */
  IDP_REST_MAX_BODY_BYTES: int({ default: 1024 * 1024, min: 1024, max: 64 * 1024 * 1024 }),
  /** REST: the most rows one insert may send (413 PGRST102 beyond). */
  IDP_REST_MAX_ROWS: int({ default: 10_000, min: 1, max: 1_000_000 }),
  /**
   * REST: writes per caller per minute, counted in rows for an insert and one for any other write
   * (429 beyond). A user counts by their id, anon by address; the secret key is not limited.
   */
  IDP_REST_WRITES_PER_MINUTE: int({ default: 50_000, min: 1, max: 100_000_000 }),
};

export type IdpConfig = ConfigOf<typeof idpConfig>;
