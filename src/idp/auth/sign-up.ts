import { randomUUID } from 'node:crypto';
import type { Clock } from '../../kit/clock.js';
import type { PoolClient } from '../../kit/db.js';
import { ACCESS_TOKEN_AUDIENCE } from '../keys.js';
import { parseEmail } from './email.js';
import type { Pkce } from './email-flows.js';
import { authErrors } from './errors.js';
import { checkMetadataLimits, checkStorableMetadata } from './metadata.js';
import { checkPasswordTooLong, type Passwords, passwordWeakness } from './passwords.js';
import type { Sessions, TokenResponse } from './sessions.js';
import type { AuthStores } from './store/stores.js';
import { EMAIL_APP_METADATA, goTime, toUser, type User, type UserRow } from './user.js';

// Sign-up (GoTrue's api/signup.go and anonymous.go) and the settings GET /settings reports: an email
// and password sign-up, confirmed at once or by a mailed link, or an anonymous sign-in.

export interface SignUpSettings {
  autoconfirm: boolean;
  /** GoTrue's DISABLE_SIGNUP: POST /signup refused, email and anonymous alike. */
  disableSignup: boolean;
  /** GoTrue's EXTERNAL_ANONYMOUS_USERS_ENABLED. */
  anonymousUsers: boolean;
}

/** The sign-up confirmation mail (email-flows.ts). */
export interface ConfirmationMail {
  /** Takes the mail limits for the address; throws 429 when no mail may go out. */
  before(email: string): Promise<void>;
  /** Issues the confirmation token and queues its mail in the transaction that made the user. */
  send(client: PoolClient, user: UserRow, redirectTo: string | undefined, pkce?: Pkce): Promise<void>;
  /** That transaction committed: the mail may go. */
  committed(): void;
}

/** The providers GoTrue's GET /settings lists under `external`, in its order. */
const EXTERNAL_PROVIDERS = [
  'anonymous_users',
  'apple',
  'azure',
  'bitbucket',
  'discord',
  'facebook',
  'snapchat',
  'figma',
  'fly',
  'github',
  'gitlab',
  'google',
  'keycloak',
  'kakao',
  'linkedin',
  'linkedin_oidc',
  'notion',
  'spotify',
  'slack',
  'slack_oidc',
  'workos',
  'twitch',
  'twitter',
  'email',
  'phone',
  'zoom',
] as const;

export interface PublicSettings {
  external: Record<string, boolean>;
  disable_signup: boolean;
  mailer_autoconfirm: boolean;
  phone_autoconfirm: boolean;
  sms_provider: string;
  saml_enabled: boolean;
  saml_private_key_next_configured: boolean;
  passkeys_enabled: boolean;
}

export class SignUp {
  constructor(
    private readonly stores: AuthStores,
    private readonly sessions: Sessions,
    private readonly passwords: Passwords,
    private readonly clock: Clock,
    private readonly settings: SignUpSettings,
    private readonly confirmation: ConfirmationMail,
  ) {}

  private now(): Date {
    return new Date(this.clock());
  }

  /** GET /settings: GoTrue's Settings, with what this idp offers (email only, besides anonymous sign-ins). */
  publicSettings(): PublicSettings {
    const external: Record<string, boolean> = {};
    for (const provider of EXTERNAL_PROVIDERS) external[provider] = false;
    external.anonymous_users = this.settings.anonymousUsers;
    external.email = true;
    return {
      external,
      disable_signup: this.settings.disableSignup,
      mailer_autoconfirm: this.settings.autoconfirm,
      phone_autoconfirm: false,
      sms_provider: '',
      saml_enabled: false,
      saml_private_key_next_configured: false,
      passkeys_enabled: false,
    };
  }

  /** GoTrue's router: a sign-up body without email and phone is an anonymous sign-in. */
  static isAnonymousSignUp(input: { email?: string; phone?: string }): boolean {
    return !input.email && !input.phone;
  }

  /** Checked before the anonymous sign-in limit is taken, as GoTrue's router does. */
  requireAnonymousSignIns(): void {
    if (!this.settings.anonymousUsers) throw authErrors.anonymousDisabled();
  }

  /**
   * GoTrue's SignupAnonymously: a user with no email, password or identity, `is_anonymous` true,
   * `data` as its user_metadata, and a session at once (amr `anonymous`).
   */
  async signUpAnonymously(input: { data?: Record<string, unknown> }): Promise<TokenResponse> {
    this.requireAnonymousSignIns();
    if (this.settings.disableSignup) throw authErrors.signupDisabled();
    const data = input.data ?? {};
    checkStorableMetadata('data', data);
    checkMetadataLimits('data', data);
    const user = await this.stores.users.createAnonymousUser(data, this.now());
    return this.sessions.start(user.id, 'anonymous');
  }

  /** A session (autoconfirm) or a bare user (confirmation pending, or the anti-enumeration reply). */
  async signUp(
    input: { email?: string; phone?: string; password?: string; data?: Record<string, unknown> },
    redirectTo?: string,
    pkce?: Pkce,
  ): Promise<TokenResponse | User> {
    if (SignUp.isAnonymousSignUp(input)) return this.signUpAnonymously(input);
    if (this.settings.disableSignup) throw authErrors.signupDisabled();
    const rawEmail = input.email ?? '';
    if (rawEmail === '') throw authErrors.phoneDisabled();
    const password = input.password ?? '';
    if (password === '') throw authErrors.validation('Signup requires a valid password');
    checkPasswordTooLong(password);
    const weakness = passwordWeakness(password);
    if (weakness) throw authErrors.weakPassword(weakness.message, weakness.reasons);
    const email = parseEmail(rawEmail);
    const data = input.data ?? {};
    checkStorableMetadata('data', data);
    checkMetadataLimits('data', data);

    // Hashing first means every branch below costs one bcrypt, whether or not the address is taken.
    const passwordHash = await this.passwords.hash(password);
    const now = this.now();
    const existing = await this.stores.users.findUserByEmail(email);
    if (existing) return this.signUpExisting(existing, email, data, now, redirectTo, pkce);

    const confirmed = this.settings.autoconfirm;
    const confirmation = this.confirmation;
    if (!confirmed) await confirmation.before(email);
    const created = await this.stores.users.createUser(
      {
        email,
        passwordHash,
        emailConfirmedAt: confirmed ? now : null,
        confirmationSentAt: confirmed ? null : now,
        userMetadata: confirmed ? { ...data, email_verified: true } : { ...data },
        appMetadata: { ...EMAIL_APP_METADATA },
        identityData: data,
        now,
      },
      confirmed ? undefined : (client, user) => confirmation.send(client, user, redirectTo, pkce),
    );
    // Lost a race with a concurrent signup of the same address: answer as if it existed before.
    if (created === undefined) {
      const winner = await this.stores.users.findUserByEmail(email);
      if (winner) return this.signUpExisting(winner, email, data, now, redirectTo, pkce);
      throw authErrors.unexpected('Database error saving new user');
    }
    if (!confirmed) {
      confirmation.committed();
      return toUser(created);
    }
    return this.sessions.startWithPassword(created, password);
  }

  private async signUpExisting(
    existing: UserRow,
    email: string,
    data: Record<string, unknown>,
    now: Date,
    redirectTo?: string,
    pkce?: Pkce,
  ): Promise<User> {
    if (this.settings.autoconfirm) throw authErrors.userAlreadyExists();
    const confirmation = this.confirmation;
    // Taken for confirmed addresses too, so a 429 does not tell them from unconfirmed ones.
    await confirmation.before(email);
    if (existing.email_confirmed_at === null) {
      // Still unconfirmed: a new confirmation mail; the stored password is left alone.
      const user = await this.stores.transaction(async (client) => {
        await confirmation.send(client, existing, redirectTo, pkce);
        return this.stores.users.findUserById(existing.id, client);
      });
      confirmation.committed();
      if (user) return toUser(user);
    }
    // Confirmed: do not reveal it. A made-up user whose empty identities is the only tell.
    const at = goTime(now);
    return {
      id: randomUUID(),
      aud: ACCESS_TOKEN_AUDIENCE,
      role: '',
      email,
      phone: '',
      confirmation_sent_at: at,
      app_metadata: { ...EMAIL_APP_METADATA },
      user_metadata: data,
      identities: [],
      created_at: at,
      updated_at: at,
      is_anonymous: false,
    };
  }
}
