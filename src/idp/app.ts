import { createHmac, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { SecretBox } from '../kit/totp.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import type { CounterStore } from '../kit/rate-limit.js';
import { type ServiceContext, defineService } from '../kit/service.js';
import { AdminUsers } from './auth/admin-users.js';
import { EmailFlows } from './auth/email-flows.js';
import { Mfa } from './auth/mfa.js';
import { MfaLimits } from './auth/mfa-limits.js';
import type { MailQueue } from './auth/mails.js';
import { Passwords, idpPasswordHasher } from './auth/passwords.js';
import { OtpLimits } from './auth/otp-limits.js';
import { PasswordUpdateLimits } from './auth/password-update-limits.js';
import { AuthRateLimits } from './auth/rate-limits.js';
import { RedirectPolicy } from './auth/redirects.js';
import { AuthStores } from './auth/store/stores.js';
import { authRoutes } from './auth/api.js';
import { jwksRoute } from './auth/routes/jwks.js';
import { IDP_DOCUMENT } from './auth/schemas.js';
import { Authentication } from './auth/authentication.js';
import { Sessions } from './auth/sessions.js';
import { SignUp } from './auth/sign-up.js';
import { UserUpdates } from './auth/user-update.js';
import { openRestPool, prepareIdpRoles } from './bootstrap.js';
import { type IdpConfig, idpConfig } from './config.js';
import { installCors } from './cors.js';
import { SigningKeys } from './keys.js';
import { restRoutes } from './rest/routes.js';
import { rootPageRoute } from './root-page.js';

/** What tests may hand the idp. */
export interface IdpDeps {
  /** The password hasher (tests count its jobs); the caller then closes it. */
  passwordHasher: PasswordHasher;
}

/** Routes that are not Supabase's own (404 catch-all, readiness) answer `{message}`, like the gateway does. */
const messageBody = (_status: number, message: string) => ({ message });

export const idp = defineService<typeof idpConfig, IdpDeps>({
  name: 'idp',
  config: idpConfig,
  // The admin connection: owns the auth schema and reads the catalog. REST has a pool of its own.
  poolMax: 5,
  migrations: (config) => {
    if (!existsSync(config.IDP_MIGRATIONS_DIR)) throw new Error(`IDP_MIGRATIONS_DIR ${config.IDP_MIGRATIONS_DIR} does not exist`);
    return [
      { scope: 'idp', dir: fileURLToPath(new URL('./migrations', import.meta.url)) },
      { scope: 'supabase', dir: config.IDP_MIGRATIONS_DIR },
    ];
  },
  mail: true,
  prepareDatabase: (superuserDatabaseUrl, config) => prepareIdpRoles(superuserDatabaseUrl, config.IDP_SECRET_KEY),
  build: buildIdp,
});

async function buildIdp({
  config,
  pool,
  databaseUrl,
  clock,
  log,
  deps,
  httpApp,
  counters,
  mail,
  onClose,
}: ServiceContext<IdpConfig, IdpDeps>) {
  // Every REST request runs on a pool connected as the login role that can only switch into the API roles.
  const restPool = await openRestPool(pool, databaseUrl, config.IDP_SECRET_KEY);
  onClose(() => restPool.end());
  const keys = await SigningKeys.load(config.IDP_SIGNING_KEY, config.DATA_DIR, clock);
  log.info({ kid: keys.kid, configured: config.IDP_SIGNING_KEY !== undefined }, 'access tokens signed with ES256');
  const app = await httpApp({
    title: 'idp',
    description: 'A local identity provider speaking the Supabase Auth (/auth/v1) and PostgREST (/rest/v1) subset used by supabase-js',
    errorBody: messageBody,
    document: IDP_DOCUMENT,
    readiness: async () => {
      await pool.query('SELECT 1');
      await restPool.query('SELECT 1');
    },
    bodyLimit: 1024 * 1024,
    metrics: { pools: { auth: pool, rest: restPool } },
  });

  installCors(app, config.IDP_CORS_ORIGINS);
  const forwardedSecret = config.IDP_FORWARDED_SECRET;
  if (forwardedSecret !== undefined) {
    // request.ip reads the raw headers each time: without the secret, the forwarded address is dropped
    // before any limit looks at it, and the request counts as its socket's.
    const expected = Buffer.from(forwardedSecret);
    app.addHook('onRequest', (request, _reply, done) => {
      const given = request.headers['x-forwarded-secret'];
      const ok = typeof given === 'string' && given.length === forwardedSecret.length && timingSafeEqual(Buffer.from(given), expected);
      if (!ok) delete request.raw.headers['x-forwarded-for'];
      delete request.raw.headers['x-forwarded-secret'];
      done();
    });
  }

  const storeFor = (limit: string): CounterStore => counters(`rate-limit:${limit}`);
  const limits = new AuthRateLimits(storeFor, clock, {
    tokenRequests: config.IDP_RATE_LIMIT_TOKEN_REFRESH,
    signups: config.IDP_RATE_LIMIT_OTP,
    anonymousSignIns: config.IDP_RATE_LIMIT_ANONYMOUS_USERS,
    emailsSent: config.IDP_RATE_LIMIT_EMAIL_SENT,
    loginFailures: config.IDP_RATE_LIMIT_LOGIN_FAILURES,
    loginFailuresPerAccount: config.IDP_RATE_LIMIT_LOGIN_FAILURES_PER_ACCOUNT,
    loginAccountsPerAddress: config.IDP_RATE_LIMIT_LOGIN_ACCOUNTS_PER_ADDRESS,
    verifications: config.IDP_RATE_LIMIT_VERIFY,
    emailFrequencySeconds: config.IDP_SMTP_MAX_FREQUENCY,
    ipv6Prefix: config.RATE_LIMIT_IPV6_PREFIX,
    ipv6WidePrefix: config.RATE_LIMIT_IPV6_WIDE_PREFIX,
  });

  const hasher = deps.passwordHasher ?? idpPasswordHasher({ maxQueued: config.BCRYPT_QUEUE_MAX });
  if (!deps.passwordHasher) onClose(() => hasher.close());
  const stores = new AuthStores(pool);
  const passwords = await Passwords.create(hasher);
  const sessions = new Sessions(
    stores,
    keys,
    clock,
    {
      jwtExpirySeconds: config.IDP_JWT_EXPIRY,
      refreshTokenReuseIntervalSeconds: config.IDP_REFRESH_TOKEN_REUSE_INTERVAL,
      issuer: `${config.IDP_SITE_URL}/auth/v1`,
      refreshTokenKey: createHmac('sha256', config.IDP_SECRET_KEY).update('idp refresh token rotation').digest(),
    },
    app.log,
  );
  const authentication = new Authentication(stores, sessions, keys, passwords, clock);
  const mailQueue: MailQueue | undefined = mail ? { enqueue: mail.enqueue, committed: mail.wake } : undefined;
  if (!mailQueue)
    app.log.warn(
      'SMTP_URL is not set: the idp sends no mail (confirmation, recovery, magic links are dropped); admin generate_link still returns links',
    );
  const emailFlows = new EmailFlows(stores, sessions, authentication, passwords, limits, clock, {
    otpExpirySeconds: config.IDP_MAILER_OTP_EXP,
    apiUrl: `${config.IDP_SITE_URL}/auth/v1`,
    redirects: new RedirectPolicy(config.IDP_APP_URL, config.IDP_REDIRECT_URLS),
    mailQueue,
    mails: {
      siteUrl: config.IDP_APP_URL,
      siteName: config.IDP_MAILER_SITE_NAME,
      offerCode: config.IDP_MAILER_OFFER_CODE,
      links: {
        signup: config.IDP_MAILER_LINK_SIGNUP,
        invite: config.IDP_MAILER_LINK_INVITE,
        recovery: config.IDP_MAILER_LINK_RECOVERY,
        magiclink: config.IDP_MAILER_LINK_MAGICLINK,
        email_change: config.IDP_MAILER_LINK_EMAIL_CHANGE,
      },
    },
    otpLimits: new OtpLimits(storeFor, clock, {
      perToken: config.IDP_OTP_MAX_ATTEMPTS,
      perAccountPerHour: config.IDP_OTP_MAX_ATTEMPTS_PER_ACCOUNT,
      tokenLifetimeSeconds: config.IDP_MAILER_OTP_EXP,
    }),
    log: app.log,
    autoconfirm: config.IDP_AUTOCONFIRM,
    disableSignup: config.IDP_DISABLE_SIGNUP,
  });
  app.addHook('onClose', () => emailFlows.drain());
  const signUp = new SignUp(
    stores,
    sessions,
    passwords,
    clock,
    {
      autoconfirm: config.IDP_AUTOCONFIRM,
      disableSignup: config.IDP_DISABLE_SIGNUP,
      anonymousUsers: config.IDP_EXTERNAL_ANONYMOUS_USERS_ENABLED,
    },
    {
      before: (email) => emailFlows.beforeConfirmationMail(email),
      send: (client, user, redirectTo, pkce) => emailFlows.confirmationMail(client, user, redirectTo, pkce),
      committed: () => emailFlows.confirmationCommitted(),
    },
  );

  // Public, like Supabase's: verifying a token needs no key; outside the gateway. So is what / says.
  await app.register(jwksRoute, { keys });
  await app.register(rootPageRoute);
  const gateway = { publishable: config.IDP_PUBLISHABLE_KEY, secret: config.IDP_SECRET_KEY };
  const users = {
    admin: new AdminUsers(authentication, stores.users, passwords, clock),
    self: new UserUpdates({
      auth: authentication,
      users: stores.users,
      passwords,
      clock,
      flows: emailFlows,
      passwordLimits: new PasswordUpdateLimits(storeFor, clock, {
        perUserPerHour: config.IDP_RATE_LIMIT_PASSWORD_UPDATES,
        perAddressPerHour: config.IDP_RATE_LIMIT_PASSWORD_UPDATES_PER_IP,
        ipv6Prefix: config.RATE_LIMIT_IPV6_PREFIX,
        ipv6WidePrefix: config.RATE_LIMIT_IPV6_WIDE_PREFIX,
      }),
      requireReauthentication: config.IDP_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION,
      autoconfirm: config.IDP_AUTOCONFIRM,
    }),
  };
  const mfaLimits = new MfaLimits(storeFor, clock, {
    requestsPerAddressPerMinute: config.IDP_MFA_RATE_LIMIT_CHALLENGE_AND_VERIFY,
    perChallenge: config.IDP_MFA_MAX_ATTEMPTS_PER_CHALLENGE,
    perFactorPerHour: config.IDP_MFA_MAX_ATTEMPTS_PER_FACTOR,
    perUserPerHour: config.IDP_MFA_MAX_ATTEMPTS_PER_USER,
    challengeLifetimeSeconds: config.IDP_MFA_CHALLENGE_EXPIRY_DURATION,
    ipv6: { prefix: config.RATE_LIMIT_IPV6_PREFIX, widePrefix: config.RATE_LIMIT_IPV6_WIDE_PREFIX },
  });
  const mfa = new Mfa(
    authentication,
    sessions,
    stores.mfa,
    stores.users,
    mfaLimits,
    new SecretBox(config.IDP_SECRET_KEY, 'idp totp secrets'),
    clock,
    {
      challengeExpirySeconds: config.IDP_MFA_CHALLENGE_EXPIRY_DURATION,
      factorExpirySeconds: config.IDP_MFA_FACTOR_EXPIRY_DURATION,
      maxEnrolledFactors: config.IDP_MFA_MAX_ENROLLED_FACTORS,
      maxVerifiedFactors: config.IDP_MFA_MAX_VERIFIED_FACTORS,
      defaultIssuer: new URL(config.IDP_APP_URL).host,
    },
  );
  await app.register(authRoutes, {
    prefix: '/auth/v1',
    gateway,
    signUp,
    sessions,
    authentication,
    limits,
    users,
    emailFlows,
    mfa: { mfa, limits: mfaLimits },
  });
  await app.register(restRoutes, {
    prefix: '/rest/v1',
    gateway,
    pool: restPool,
    catalogPool: pool,
    keys,
    clock,
    writeCounter: storeFor('rest-writes'),
    settings: {
      schemas: config.IDP_REST_SCHEMAS,
      txEnd: config.IDP_REST_TX_END,
      maxBodyBytes: config.IDP_REST_MAX_BODY_BYTES,
      maxRows: config.IDP_REST_MAX_ROWS,
      writesPerMinute: config.IDP_REST_WRITES_PER_MINUTE,
      ipv6Prefix: config.RATE_LIMIT_IPV6_PREFIX,
      ipv6WidePrefix: config.RATE_LIMIT_IPV6_WIDE_PREFIX,
    },
  });

  return app;
}
