import {
  type ConfigOf,
  ConfigError,
  type VarSpec,
  bool,
  commonVars,
  connectionUrl,
  duration,
  httpUrl,
  int,
  oneOf,
  str,
} from '../kit/config.js';
import { mailVars } from '../kit/mail/transport.js';
import { es256PrivateKey } from '../kit/es256-keys.js';
import { passwordHasherVars } from '../kit/password-hasher.js';
import { es256PublicKeys } from './signing-keys.js';
import { emailProblem, normalizeEmail, passwordProblem } from './validation.js';

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
  /**
   * HS256 key of the access tokens (and, whatever the algorithm, of the refresh-token chain);
   * 32 bytes is the size of the SHA-256 output, the minimum that does not weaken HMAC.
   */
  JWT_SECRET: str({ required: true, minBytes: 32 }),
  /** HS256 (the contract) signs with JWT_SECRET; ES256 with JWT_PRIVATE_KEY, published at /.well-known/jwks.json. */
  JWT_ALGORITHM: oneOf(['HS256', 'ES256'] as const, { default: 'HS256' }),
  /** ES256 only: the P-256 private key (PEM or JWK); unset, one is generated once under DATA_DIR. */
  JWT_PRIVATE_KEY: es256PrivateKey(),
  /** ES256 only: public keys still accepted and published, so tokens signed before a rotation live out their lifetime. */
  JWT_PREVIOUS_PUBLIC_KEYS: es256PublicKeys(),
  /** Lifetime of an access token, in seconds once loaded. */
  JWT_EXPIRES_IN: duration({ unit: 's', default: 3600 }),
  /** The admin account created at start when both are set; never a default password. */
  ADMIN_EMAIL: checked(emailProblem, normalizeEmail),
  ADMIN_PASSWORD: checked(passwordProblem),
  /** When set, login-failure and registration counters live in Redis and are shared by every instance. */
  REDIS_URL: connectionUrl(['redis:', 'rediss:']),
  /** Registrations allowed per client IP per REGISTER_WINDOW (each costs a cost-12 bcrypt hash). */
  REGISTER_MAX_PER_IP: int({ default: 1000, min: 1 }),
  REGISTER_WINDOW: duration({ unit: 's', default: 3600 }),
  /** A session (its refresh token) ends when unused this long... */
  SESSION_IDLE_TIMEOUT: duration({ unit: 's', default: 7 * 86_400 }),
  /** ...and this long after login, however much it is used. */
  SESSION_MAX_LIFETIME: duration({ unit: 's', default: 30 * 86_400 }),
  /** How long a just-replaced refresh token still answers with the session's current pair (tabs refreshing at once). */
  REFRESH_REUSE_INTERVAL: duration({ unit: 's', default: 10 }),
  /** How often expired sessions and used or expired email tokens are deleted; 0: never. */
  PRUNE_INTERVAL: duration({ unit: 's', default: 3600, off: true }),
  /** SMTP_URL (unset: the mail endpoints answer 503) and MAIL_FROM. */
  ...mailVars('Accounts <no-reply@localhost>'),
  /**
   * Where users reach the account pages: mails link to <ACCOUNTS_PUBLIC_URL>/reset-password and
   * /verify-email. Default http://127.0.0.1:<PORT>, except with NODE_ENV=production, where it must
   * be set: a mail linking to the server's own loopback reaches nobody.
   */
  ACCOUNTS_PUBLIC_URL: httpUrl({
    default: (env: Record<string, string | undefined>) => {
      if (env.NODE_ENV === 'production') {
        throw new ConfigError(
          'ACCOUNTS_PUBLIC_URL',
          'is required when NODE_ENV=production (the address mails link to, e.g. https://accounts.example.com)',
        );
      }
      return `http://127.0.0.1:${env.PORT || 3000}`;
    },
  }),
  /** On: registration mails a verification link and login answers 403 until it is followed (needs SMTP_URL). */
  REQUIRE_EMAIL_VERIFICATION: bool({ default: false }),
  /**
   * On: POST /auth/email-signin mails a sign-in link and code (needs SMTP_URL), and the sign-in page
   * offers it. Off: those routes and the /email-signin page answer 404 like unknown paths.
   */
  EMAIL_SIGNIN: bool({ default: false }),
  /** Password-reset and verification requests per client IP per MAIL_REQUESTS_WINDOW. */
  MAIL_REQUESTS_MAX_PER_IP: int({ default: 20, min: 1 }),
  MAIL_REQUESTS_WINDOW: duration({ unit: 's', default: 3600 }),
  /**
   * Sensitive operations (password change, second-factor changes) need a sign-in no older than this;
   * older, they answer 401 reauthentication_required.
   */
  REAUTH_MAX_AGE: duration({ unit: 's', default: 600 }),
  /**
   * On: admin routes need an admin with a second factor, signed in with it; admins' tokens carry aal.
   * Off by default: the contract's admin (ADMIN_EMAIL, no factor) must reach GET /admin/users with a password login.
   */
  REQUIRE_ADMIN_MFA: bool({ default: false }),
  // 32 cost-12 jobs are about 5 s of work for 2 cores.
  ...passwordHasherVars(32),
};

export type AccountsConfig = ConfigOf<typeof accountsConfig>;
