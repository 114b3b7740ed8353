import type { Clock } from '../../kit/clock.js';
import type { Caller } from '../gateway.js';
import { mergeMetadata } from './admin-users.js';
import { parseEmail } from './email.js';
import { AuthError, authErrors } from './errors.js';
import type { EmailFlows } from './email-flows.js';
import { checkMetadataLimits } from './metadata.js';
import { checkPasswordTooLong, type Passwords, passwordWeakness } from './passwords.js';
import type { AuthRepository } from './repository.js';
import { type AuthService, checkStorableMetadata } from './service.js';
import { toUser, type User } from './user.js';

// PUT /auth/v1/user (GoTrue's api/user.go UserUpdate): the signed-in user changes their own
// password, metadata and address. A new address is taken at once when sign-ups are confirmed
// at once (IDP_AUTOCONFIRM, GoTrue's MAILER_AUTOCONFIRM); otherwise it waits for both addresses
// to confirm by mail (GoTrue's secure email change, on by default).

export interface UserUpdateAttributes {
  email?: string;
  phone?: string;
  password?: string;
  data?: Record<string, unknown>;
}

export class UserUpdates {
  constructor(
    private readonly auth: AuthService,
    private readonly repo: AuthRepository,
    private readonly passwords: Passwords,
    private readonly clock: Clock,
    private readonly emailChange: { autoconfirm: boolean; flows: EmailFlows },
  ) {}

  async update(caller: Caller, attrs: UserUpdateAttributes, redirectTo?: string): Promise<User> {
    const { user, session } = await this.auth.authenticate(caller);
    // The same address again is no change (GoTrue skips it too).
    const parsedEmail = attrs.email ? parseEmail(attrs.email) : undefined;
    const newEmail = parsedEmail !== undefined && parsedEmail !== user.email ? parsedEmail : undefined;
    const mailed = newEmail !== undefined && !this.emailChange.autoconfirm;
    if (attrs.phone) throw authErrors.validation('Phone users are not supported by this identity provider');
    checkStorableMetadata('data', attrs.data);
    let passwordHash: string | undefined;
    if (attrs.password !== undefined) {
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
    if (mailed) await this.emailChange.flows.beforeEmailChange(user.id, newEmail);
    const now = new Date(this.clock());
    const updated = await this.repo.updateUser(user.id, (current) => {
      const userMetadata = attrs.data && mergeMetadata(current.raw_user_meta_data, attrs.data);
      checkMetadataLimits('data', userMetadata);
      return { passwordHash, userMetadata, keepSession: session.id, now, email: mailed ? undefined : newEmail };
    });
    if (updated === 'emailTaken') throw authErrors.emailExists();
    // Deleted between the token check and now: as if the token's user never existed.
    if (updated === undefined) throw authErrors.userFromSubNotFound();
    if (!mailed) return toUser(updated);
    await this.emailChange.flows.requestEmailChange(updated, newEmail, redirectTo);
    return toUser((await this.repo.findUserById(user.id)) ?? updated);
  }
}
