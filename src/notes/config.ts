import { commonVars, type ConfigOf, duration, httpUrl, httpVars, oneOf, str } from '../kit/config.js';

// Notes keeps no database of its own: every row lives behind the identity
// provider's REST API. So only the listening, logging and HTTP parts of the
// common variables apply; DATABASE_URL and DATA_DIR are deliberately not part of it.
const { PORT, HOST, LOG_LEVEL, TRUST_PROXY, METRICS_TOKEN } = commonVars(9999);

export const TOKEN_VERIFICATION_MODES = ['remote', 'local'] as const;
export type TokenVerificationMode = (typeof TOKEN_VERIFICATION_MODES)[number];

export const notesConfig = {
  PORT,
  HOST,
  LOG_LEVEL,
  TRUST_PROXY,
  METRICS_TOKEN,
  ...httpVars(),
  /** Base URL of the Supabase-compatible provider, e.g. https://<ref>.supabase.co or http://127.0.0.1:54321. */
  IDP_URL: httpUrl({ required: true }),
  /** Used only to check access tokens (GET /auth/v1/user); never for notes. */
  IDP_SECRET_KEY: str({ required: true }),
  /** Sent with the caller's address to the idp, which believes X-Forwarded-For only with it (npm start sets both). */
  IDP_FORWARDED_SECRET: str(),
  /** Used for sign-up, login, and (with the user's token) every notes request. */
  IDP_PUBLISHABLE_KEY: str({ required: true }),
  /** remote: ask the provider for every request; local: verify signatures against its JWKS. */
  IDP_VERIFY: oneOf(TOKEN_VERIFICATION_MODES, { default: 'remote' }),
  /**
   * Where users reach this service (scheme, host, port, optional path): the provider's recovery
   * mail links to `<NOTES_PUBLIC_URL>/reset-password`, which the provider must allow as a redirect.
   */
  NOTES_PUBLIC_URL: httpUrl({ default: (env: Record<string, string | undefined>) => `http://127.0.0.1:${env.PORT || 9999}` }),
  /** Upper bound on any one request to the provider, so a hung provider becomes a 503, not a hung client. */
  IDP_TIMEOUT_MS: duration({ unit: 'ms', default: 5000, min: 100, max: 120_000 }),
};

export type NotesConfig = ConfigOf<typeof notesConfig>;
