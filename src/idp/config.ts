import { createPrivateKey } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { ConfigError, type ConfigOf, bool, commonVars, httpUrl, int, str, type VarSpec } from '../kit/config.js';
import { passwordHasherVars } from '../kit/password-hasher.js';

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

export const idpConfig = {
  ...commonVars(54321),
  IDP_PUBLISHABLE_KEY: opaqueKey('sb_publishable_'),
  IDP_SECRET_KEY: opaqueKey('sb_secret_'),
  /** On: signup confirms at once and returns a session (the local Supabase CLI default). */
  IDP_AUTOCONFIRM: bool({ default: true }),
  // supabase-js refreshes before every call when a token has 90 s or less left, so shorter
  // lifetimes would double the traffic.
  IDP_JWT_EXPIRY: int({ default: 3600, min: 120, max: 7 * 24 * 3600 }),
  /** Absent: one is generated and kept under DATA_DIR (all instances must share it; see README). */
  IDP_SIGNING_KEY: es256PrivateKey(),
  /** The public base URL of the idp; access tokens are issued by `<IDP_SITE_URL>/auth/v1`. */
  IDP_SITE_URL: httpUrl({ default: (env: Record<string, string | undefined>) => `http://127.0.0.1:${env.PORT || 54321}` }),
  /** The app migrations applied after the idp's own, like `supabase start` does. */
  IDP_MIGRATIONS_DIR: str({ default: fileURLToPath(new URL('../../supabase/migrations', import.meta.url)) }),
  // 128 cost-10 jobs are about 5 s of work for 2 cores, as the accounts default is at cost 12.
  ...passwordHasherVars(128),
};

export type IdpConfig = ConfigOf<typeof idpConfig>;
