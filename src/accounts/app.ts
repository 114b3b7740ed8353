import { fileURLToPath } from 'node:url';
import { statusEnvelope } from '../kit/http/status-envelope.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import type { CounterStore } from '../kit/rate-limit.js';
import { defineService } from '../kit/service.js';
import { seedAdmin } from './admin-seed.js';
import { AuditLog } from './audit.js';
import type { AccessCheck, StepUp } from './auth.js';
import { accountsConfig } from './config.js';
import { EmailFlows } from './email-flows.js';
import { EmailTokens } from './email-tokens.js';
import { EmailSignin } from './email-signin.js';
import { FactorFailureBudget, Factors } from './factors.js';
import { LoginThrottle } from '../kit/login-throttle.js';
import { LOGIN_FAILURE_LIMITS, RefusalRecorder, emailDigester } from './login-throttle.js';
import { installAccountsMetrics } from './metrics.js';
import { NewDevices } from './new-devices.js';
import { Passkeys } from './passkeys.js';
import { accountsPasswordHasher, dummyPasswordHash } from './passwords.js';
import { createPruner } from './pruning.js';
import { UsersRepository } from './repository.js';
import { adminAuditRoute } from './routes/admin-audit.js';
import { browserSessionRoutes } from './routes/browser-session.js';
import { adminUserChangesRoutes } from './routes/admin-user-changes.js';
import { adminUserFactorsRoutes } from './routes/admin-user-factors.js';
import { adminUsersRoute } from './routes/admin-users.js';
import { emailSigninRoutes, emailSigninStatusRoute } from './routes/email-signin.js';
import { factorRoutes } from './routes/factors.js';
import { passkeyRoutes } from './routes/passkeys.js';
import { jwksRoute } from './routes/jwks.js';
import { loginRoute } from './routes/login.js';
import { meRoute } from './routes/me.js';
import { passwordRoute } from './routes/password.js';
import { passwordResetRoutes } from './routes/password-reset.js';
import { refreshRoute } from './routes/refresh.js';
import { registerRoute } from './routes/register.js';
import { ACCOUNTS_DOCUMENT } from './routes/schemas.js';
import { sessionsRoutes } from './routes/sessions.js';
import { verifyEmailRoutes } from './routes/verify-email.js';
import { webPagesRoutes } from './routes/web-pages.js';
import { AccountsService } from './service.js';
import { RefreshTokens, Sessions } from './sessions.js';
import { Es256Keys } from './signing-keys.js';
import { AccessTokens } from './tokens.js';
import { SecretBox } from '../kit/totp.js';
import { UserAdministration } from './user-admin.js';

/** What tests may hand the accounts service. */
export interface AccountsDeps {
  /** Where login-failure counters live (tests pre-fill one); the kit's counters otherwise. */
  loginCounterStore: CounterStore;
  /** The password hasher (tests count its jobs); the caller then closes it. */
  passwordHasher: PasswordHasher;
}

/** Passkey sign-in options per client address per minute: each stores a challenge for 5 minutes. */
export const PASSKEY_SIGN_IN_OPTIONS_PER_MINUTE = 30;

export const accounts = defineService<typeof accountsConfig, AccountsDeps>({
  name: 'accounts',
  config: accountsConfig,
  migrations: () => [{ scope: 'accounts', dir: fileURLToPath(new URL('./migrations', import.meta.url)) }],
  mail: true,
  async build({ config, pool, clock, log, deps, httpApp, counters, limiter, mail, every, onClose }) {
    if (config.REQUIRE_EMAIL_VERIFICATION && !mail) {
      throw new Error('REQUIRE_EMAIL_VERIFICATION is on but SMTP_URL is not set: verification mails could not be sent');
    }
    if (config.EMAIL_SIGNIN && !mail) {
      throw new Error('EMAIL_SIGNIN is on but SMTP_URL is not set: sign-in mails could not be sent');
    }
    const app = await httpApp({
      title: 'Accounts',
      description: 'Registration, login with a signed access token (HS256, or ES256 with a published JWKS), profile, admin listing.',
      document: ACCOUNTS_DOCUMENT,
      errorBody: statusEnvelope,
    });

    const passwords = deps.passwordHasher ?? accountsPasswordHasher({ maxQueued: config.BCRYPT_QUEUE_MAX });
    if (!deps.passwordHasher) onClose(() => passwords.close());
    installAccountsMetrics(app, passwords);
    // Made before the first request, so the first unknown-email login is not
    // slower than a wrong password (the hash is made once per process).
    await dummyPasswordHash(passwords);
    const users = new UsersRepository(pool);
    await seedAdmin(users, config, log, passwords);

    if (!mail) log.warn({ event: 'mail_not_configured' }, 'SMTP_URL is not set: password reset and email verification answer 503');

    let es256: Es256Keys | undefined;
    if (config.JWT_ALGORITHM === 'ES256') {
      es256 = await Es256Keys.load(config.JWT_PRIVATE_KEY, config.JWT_PREVIOUS_PUBLIC_KEYS ?? [], config.DATA_DIR);
      log.info(
        { kid: es256.kid, configured: config.JWT_PRIVATE_KEY !== undefined, previousKeys: es256.jwks().keys.length - 1 },
        'access tokens signed with ES256',
      );
    }
    const tokens = new AccessTokens(
      es256 ? { algorithm: 'ES256', keys: es256 } : { algorithm: 'HS256', secret: config.JWT_SECRET },
      config.JWT_EXPIRES_IN,
      clock,
      config.REQUIRE_ADMIN_MFA,
    );
    const audit = new AuditLog(pool, clock);
    const sessions = new Sessions(
      pool,
      users,
      audit,
      tokens,
      new RefreshTokens(config.JWT_SECRET),
      {
        idleMs: config.SESSION_IDLE_TIMEOUT * 1000,
        maxLifetimeMs: config.SESSION_MAX_LIFETIME * 1000,
        reuseIntervalMs: config.REFRESH_REUSE_INTERVAL * 1000,
      },
      clock,
      new NewDevices(audit, mail, clock),
    );
    const emailDigest = emailDigester(config.JWT_SECRET);
    const ipv6 = { prefix: config.RATE_LIMIT_IPV6_PREFIX, widePrefix: config.RATE_LIMIT_IPV6_WIDE_PREFIX };
    // Shared by every kind of mail request: one mail per address per minute, whichever kind.
    const mailLimits = {
      perIp: limiter('mail-requests', config.MAIL_REQUESTS_MAX_PER_IP, config.MAIL_REQUESTS_WINDOW * 1000),
      perAddress: limiter('mail-addresses', 1, 60_000),
    };
    const emails = new EmailFlows({
      pool,
      users,
      tokens: new EmailTokens(pool),
      sessions,
      audit,
      passwords,
      limits: mailLimits,
      ipv6,
      emailDigest,
      publicUrl: config.ACCOUNTS_PUBLIC_URL,
      mail,
      clock,
    });
    const budget = new FactorFailureBudget(counters('factor-failures'), audit, clock);
    // The relying party of passkeys is the address people reach the pages at: its host is the
    // RP id, its origin the only one whose answers are accepted.
    const publicUrl = new URL(config.ACCOUNTS_PUBLIC_URL);
    const passkeys = new Passkeys({
      pool,
      users,
      sessions,
      audit,
      budget,
      mail,
      rpId: publicUrl.hostname,
      origin: publicUrl.origin,
      rpName: `Accounts (${publicUrl.host})`,
      signInOptions: limiter('passkey-sign-in-options', PASSKEY_SIGN_IN_OPTIONS_PER_MINUTE, 60_000),
      ipv6,
      clock,
    });
    const factors = new Factors({
      pool,
      users,
      sessions,
      audit,
      secrets: new SecretBox(config.JWT_SECRET, 'accounts totp secrets'),
      budget,
      passkeys,
      mail,
      // What authenticator apps show beside the account: the address people reach the pages at.
      issuer: `Accounts (${new URL(config.ACCOUNTS_PUBLIC_URL).host})`,
      clock,
    });
    const loginThrottle = new LoginThrottle(
      deps.loginCounterStore ?? counters('login-failures'),
      clock,
      LOGIN_FAILURE_LIMITS,
      ipv6,
      counters('login-known-addresses'),
    );
    const accountsService = new AccountsService({
      pool,
      users,
      sessions,
      audit,
      throttle: loginThrottle,
      refusals: new RefusalRecorder(counters('login-refusals')),
      emailDigest,
      passwords,
      registrations: limiter('registrations', config.REGISTER_MAX_PER_IP, config.REGISTER_WINDOW * 1000),
      ipv6,
      clock,
      emails,
      requireVerifiedEmail: config.REQUIRE_EMAIL_VERIFICATION,
      factors,
    });
    // Sign-in by mail, when EMAIL_SIGNIN is on.
    const signin = config.EMAIL_SIGNIN
      ? new EmailSignin({
          pool,
          users,
          sessions,
          audit,
          factors,
          throttle: loginThrottle,
          limits: mailLimits,
          ipv6,
          emailDigest,
          jwtSecret: config.JWT_SECRET,
          publicUrl: config.ACCOUNTS_PUBLIC_URL,
          mail,
          clock,
        })
      : undefined;
    // Sensitive operations (password change, second-factor changes) need a sign-in this recent.
    const stepUp: StepUp = { maxAgeSeconds: config.REAUTH_MAX_AGE, clock };
    // What every protected route's requireAccessToken checks a token against.
    // With REQUIRE_ADMIN_MFA, the admin routes also ask for the admin's second factor.
    const access: AccessCheck = { tokens, users, audit, adminSecondFactor: config.REQUIRE_ADMIN_MFA ? factors : undefined };

    if (config.PRUNE_INTERVAL > 0) {
      const pruner = createPruner({
        pool,
        clock,
        idleMs: config.SESSION_IDLE_TIMEOUT * 1000,
        maxLifetimeMs: config.SESSION_MAX_LIFETIME * 1000,
      });
      onClose(() => pruner.stop());
      every(
        'pruning',
        config.PRUNE_INTERVAL * 1000,
        async () => {
          const counts = await pruner.runOnce();
          app.log.info({ event: 'pruned', ...counts }, 'deleted expired sessions, email tokens and login challenges');
        },
        // An instance restarted more often than the interval (each deploy) still prunes.
        { firstRunAfterMs: 60_000 },
      );
    }

    // The route map. Public:
    await app.register(registerRoute, { accounts: accountsService });
    await app.register(loginRoute, { accounts: accountsService });
    await app.register(refreshRoute, { sessions });
    await app.register(jwksRoute, { keys: es256 });
    await app.register(passwordResetRoutes, { emails });
    await app.register(verifyEmailRoutes, { emails });
    await app.register(emailSigninStatusRoute, { enabled: signin !== undefined });
    if (signin) await app.register(emailSigninRoutes, { signin });
    // A valid token; a deleted user's is 404 on /auth/me (docs/accounts.md, rule 5):
    await app.register(meRoute, { access });
    await app.register(sessionsRoutes, { sessions, access });
    await app.register(passwordRoute, { accounts: accountsService, access, stepUp });
    // The second step of a login (public), and the caller's factors (a token; changes need a recent sign-in):
    await app.register(factorRoutes, { factors, access, stepUp });
    // Passkeys: sign-in with one (public), and the caller's (a token; adding and removing need a recent sign-in):
    await app.register(passkeyRoutes, { passkeys, access, stepUp });
    // A valid token, then role admin (docs/accounts.md, rule 6):
    await app.register(adminUsersRoute, { accounts: accountsService, access });
    await app.register(adminUserChangesRoutes, { admin: new UserAdministration(pool, users, sessions, audit, clock), access, stepUp });
    await app.register(adminAuditRoute, { audit, access });
    await app.register(adminUserFactorsRoutes, { factors, access, stepUp });
    // The web pages over this API (src/accounts/web/), and their session in a cookie:
    await app.register(browserSessionRoutes, {
      accounts: accountsService,
      sessions,
      access,
      factors,
      passkeys,
      stepUp,
      cookieMaxAgeSeconds: config.SESSION_MAX_LIFETIME,
      emailSignin: signin,
    });
    await app.register(webPagesRoutes, { emailSignin: config.EMAIL_SIGNIN });
    return app;
  },
});
