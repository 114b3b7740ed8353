import type { Clock } from '../../kit/clock.js';
import type { Caller } from '../gateway.js';
import { mergeMetadata } from './admin-users.js';
import { parseEmail } from './email.js';
import { AuthError, authErrors } from './errors.js';
import type { EmailFlows } from './email-flows.js';
import { checkMetadataLimits, checkStorableMetadata } from './metadata.js';
import { checkPasswordTooLong, type Passwords, passwordWeakness } from './passwords.js';
import type { PasswordUpdateLimits } from './password-update-limits.js';
import type { UserStore } from './store/users.js';
import type { Authentication } from './authentication.js';
import { toUser, type User } from './user.js';

// PUT /auth/v1/user (GoTrue's api/user.go UserUpdate): the signed-in user changes their own
// password, metadata and address. A new address always waits for both addresses to confirm by mail
// (GoTrue's secure email change), even where sign-ups are confirmed at once (IDP_AUTOCONFIRM): a
// stolen access token alone must not move the account to the thief's address, and the owner's
// address is always told. An anonymous user has no address to take over: its first one is
// confirmed by mail, or at once with IDP_AUTOCONFIRM (as GoTrue), which makes it permanent.

export interface UserUpdateAttributes {
  email?: string;
  phone?: string;
  password?: string;
  /** The reauthentication nonce (GET /reauthenticate). */
  nonce?: string;
  data?: Record<string, unknown>;
}

export interface UserUpdateDeps {
  auth: Authentication;
  users: UserStore;
  passwords: Passwords;
  clock: Clock;
  /** Mails the email change's links and the reauthentication nonce. */
  flows: EmailFlows;
  passwordLimits: PasswordUpdateLimits;
  /** IDP_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION. */
  requireReauthentication: boolean;
  /** IDP_AUTOCONFIRM: an anonymous user's first address is taken without a mail. */
  autoconfirm: boolean;
}

/** GoTrue's window: a session signed in within the last day may change its password without a nonce. */
const RECENT_SIGN_IN_MS = 24 * 60 * 60_000;

export class UserUpdates {
  private readonly auth: Authentication;
  private readonly users: UserStore;
  private readonly passwords: Passwords;
  private readonly clock: Clock;
  private readonly flows: EmailFlows;
  private readonly passwordLimits: PasswordUpdateLimits;
  private readonly requireReauthentication: boolean;
  private readonly autoconfirm: boolean;

  constructor(deps: UserUpdateDeps) {
    ({
      auth: this.auth,
      users: this.users,
      passwords: this.passwords,
      clock: this.clock,
      flows: this.flows,
      passwordLimits: this.passwordLimits,
      requireReauthentication: this.requireReauthentication,
      autoconfirm: this.autoconfirm,
    } = deps);
  }

  /** GET /reauthenticate: mails the caller a nonce for a password change. */
  async reauthenticate(caller: Caller): Promise<Record<string, never>> {
    const { user } = await this.auth.authenticate(caller);
    return this.flows.reauthenticate(user);
  }

  /** `ip`: the client's address, for the password update limit. */
  async update(caller: Caller, attrs: UserUpdateAttributes, redirectTo: string | undefined, ip: string): Promise<User> {
    const { user, session } = await this.auth.authenticate(caller);
    // The same address again is no change (GoTrue skips it too).
    const parsedEmail = attrs.email ? parseEmail(attrs.email) : undefined;
    const newEmail = parsedEmail !== undefined && parsedEmail !== user.email ? parsedEmail : undefined;
    // An anonymous user's first address, with autoconfirm: taken at once, no mail.
    const takenAtOnce = newEmail !== undefined && user.is_anonymous && this.autoconfirm;
    const mailed = newEmail !== undefined && !takenAtOnce;
    if (attrs.phone) throw authErrors.validation('Phone users are not supported by this identity provider');
    checkStorableMetadata('data', attrs.data);
    // GoTrue's rule: a password alone would leave an anonymous user with no way to sign in with it.
    if (user.is_anonymous && attrs.password && !attrs.email) {
      throw new AuthError(422, 'validation_failed', 'Updating password of an anonymous user without an email or phone is not allowed');
    }
    let passwordHash: string | undefined;
    if (attrs.password !== undefined) {
      // Counted before the two bcrypt operations below.
      await this.passwordLimits.take(user.id, ip);
      // GoTrue's rule: a session that signed in within the last day (a password reset's included)
      // needs nothing more; an older one, the nonce GET /reauthenticate mailed.
      if (this.requireReauthentication && this.clock() - session.created_at.getTime() > RECENT_SIGN_IN_MS) {
        if (!attrs.nonce) throw new AuthError(400, 'reauthentication_needed', 'Password update requires reauthentication');
        await this.flows.useReauthenticationNonce(user, attrs.nonce);
      }
      const password = attrs.password;
      checkPasswordTooLong(password);
      const weakness = passwordWeakness(password);
      if (weakness) throw authErrors.weakPassword(weakness.message, weakness.reasons);
      if (user.encrypted_password !== null && (await this.passwords.verify(password, user.encrypted_password))) {
        throw new AuthError(422, 'same_password', 'New password should be different from the old password.');
      }
      passwordHash = await this.passwords.hash(password);
    }
    // The address must be free and a mail to it allowed before anything is written.
    if (mailed) await this.flows.beforeEmailChange(user.id, newEmail);
    if (takenAtOnce) {
      const owner = await this.users.findUserByEmail(newEmail);
      if (owner && owner.id !== user.id) throw authErrors.emailExists();
    }
    const now = new Date(this.clock());
    const updated = await this.users.updateUser(user.id, (current) => {
      const userMetadata = attrs.data && mergeMetadata(current.raw_user_meta_data, attrs.data);
      checkMetadataLimits('data', userMetadata);
      return { passwordHash, userMetadata, keepSession: session.id, now, confirmedEmail: takenAtOnce ? newEmail : undefined };
    });
    if (updated === 'emailTaken') throw authErrors.emailExists();
    // Deleted between the token check and now: as if the token's user never existed.
    if (updated === undefined) throw authErrors.userFromSubNotFound();
    if (!mailed) return toUser(updated);
    await this.flows.requestEmailChange(updated, newEmail, redirectTo);
    return toUser((await this.users.findUserById(user.id)) ?? updated);
  }
}
