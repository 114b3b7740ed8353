import type { Clock } from '../../kit/clock.js';
import type { Caller } from '../gateway.js';
import { parseEmail } from './email.js';
import { AuthError, authErrors } from './errors.js';
import { parseBanDuration } from './go-duration.js';
import { checkMetadataLimits, checkStorableMetadata } from './metadata.js';
import { checkPasswordTooLong, type Passwords, passwordWeakness, randomPassword } from './passwords.js';
import type { UserChanges, UserStore } from './store/users.js';
import { type Authentication, UUID } from './authentication.js';
import { EMAIL_APP_METADATA, toUser, type User } from './user.js';

// The admin user API behind the secret key (GoTrue's api/admin.go): list, create, read, change and
// delete users. A soft-deleted user is gone for all of them.

/** GoTrue's page size when per_page is absent. */
export const DEFAULT_PER_PAGE = 50;
/** This idp's cap on per_page (GoTrue has none), so one request cannot load every user at once. */
export const MAX_PER_PAGE = 1000;

export interface UserPage {
  users: User[];
  aud: string;
  page: number;
  perPage: number;
  total: number;
}

export interface AdminUserAttributes {
  email?: string;
  phone?: string;
  password?: string;
  email_confirm?: boolean;
  user_metadata?: Record<string, unknown>;
  app_metadata?: Record<string, unknown>;
  ban_duration?: string;
}

/** A page query value as GoTrue reads it (strconv.ParseUint), or its 400. */
function pageNumber(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d{1,15}$/.test(raw))
    throw authErrors.validation(`Bad Pagination Parameters: strconv.ParseUint: parsing ${JSON.stringify(raw)}: invalid syntax`);
  const value = Number(raw);
  if (value === 0) throw authErrors.validation(`Bad Pagination Parameters: ${name} must be greater than 0`);
  return value;
}

/**
 * GoTrue merges metadata key by key: a key sent as null is removed, any other value replaces the
 * stored one; keys not sent stay. Keys are defined, never assigned: assigning `__proto__` would
 * replace the object's prototype instead of storing a key (HTTP bodies with that key are refused
 * by the kit's JSON parser before they get here; this holds for any other caller too).
 */
export function mergeMetadata(current: Record<string, unknown>, updates: Record<string, unknown>): Record<string, unknown> {
  const merged = { ...current };
  for (const [key, value] of Object.entries(updates)) {
    if (value === null) delete merged[key];
    else Object.defineProperty(merged, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return merged;
}

function checkUserId(id: string): void {
  if (!UUID.test(id)) throw new AuthError(404, 'validation_failed', 'user_id must be an UUID');
}

export class AdminUsers {
  constructor(
    private readonly auth: Authentication,
    private readonly users: UserStore,
    private readonly passwords: Passwords,
    private readonly clock: Clock,
  ) {}

  async list(caller: Caller, query: { page?: string; per_page?: string }): Promise<UserPage> {
    await this.auth.requireAdmin(caller);
    const page = pageNumber('page', query.page, 1);
    const perPage = Math.min(pageNumber('per_page', query.per_page, DEFAULT_PER_PAGE), MAX_PER_PAGE);
    const { users, total } = await this.users.listUsers(perPage, (page - 1) * perPage);
    return { users: users.map(toUser), aud: 'authenticated', page, perPage, total };
  }

  async get(caller: Caller, id: string): Promise<User> {
    await this.auth.requireAdmin(caller);
    checkUserId(id);
    const user = await this.users.findUserById(id);
    if (!user) throw authErrors.userNotFound();
    return toUser(user);
  }

  async update(caller: Caller, id: string, attrs: AdminUserAttributes): Promise<User> {
    await this.auth.requireAdmin(caller);
    checkUserId(id);
    // Everything is checked before anything changes.
    if (attrs.phone) throw authErrors.validation('Phone users are not supported by this identity provider');
    const email = attrs.email ? parseEmail(attrs.email) : undefined;
    const now = new Date(this.clock());
    let bannedUntil: Date | null | undefined;
    if (attrs.ban_duration !== undefined && attrs.ban_duration !== '') {
      // "none" lifts the ban; a zero or negative duration leaves the user unbanned too.
      const ms = attrs.ban_duration === 'none' ? 0 : parseBanDuration(attrs.ban_duration);
      bannedUntil = ms === 0 ? null : new Date(now.getTime() + ms);
    }
    checkStorableMetadata('user_metadata', attrs.user_metadata);
    checkStorableMetadata('app_metadata', attrs.app_metadata);
    let passwordHash: string | undefined;
    if (attrs.password !== undefined) {
      checkPasswordTooLong(attrs.password);
      const weakness = passwordWeakness(attrs.password);
      if (weakness) throw authErrors.weakPassword(weakness.message, weakness.reasons);
      passwordHash = await this.passwords.hash(attrs.password);
    }
    const updated = await this.users.updateUser(id, (current): UserChanges => {
      const userMetadata = attrs.user_metadata && mergeMetadata(current.raw_user_meta_data, attrs.user_metadata);
      const appMetadata = attrs.app_metadata && mergeMetadata(current.raw_app_meta_data, attrs.app_metadata);
      checkMetadataLimits('user_metadata', userMetadata);
      checkMetadataLimits('app_metadata', appMetadata);
      return { email, passwordHash, confirmEmail: attrs.email_confirm === true, bannedUntil, userMetadata, appMetadata, now };
    });
    if (updated === 'emailTaken') throw authErrors.emailExists();
    if (!updated) throw authErrors.userNotFound();
    return toUser(updated);
  }

  /** POST /admin/users. */
  async create(caller: Caller, attrs: Omit<AdminUserAttributes, 'ban_duration'>): Promise<User> {
    await this.auth.requireAdmin(caller);
    if (!attrs.email) {
      if (attrs.phone) throw authErrors.validation('Phone users are not supported by this identity provider');
      throw authErrors.validation('Cannot create a user without either an email or phone');
    }
    const email = parseEmail(attrs.email);
    checkStorableMetadata('user_metadata', attrs.user_metadata);
    checkStorableMetadata('app_metadata', attrs.app_metadata);
    checkMetadataLimits('user_metadata', attrs.user_metadata);
    checkMetadataLimits('app_metadata', attrs.app_metadata);
    // No strength check here (GoTrue's admin API does none), only bcrypt's limit.
    const password = attrs.password ?? randomPassword();
    checkPasswordTooLong(password);
    const now = new Date(this.clock());
    const confirmed = attrs.email_confirm === true;
    const created = await this.users.createUser({
      email,
      passwordHash: await this.passwords.hash(password),
      emailConfirmedAt: confirmed ? now : null,
      confirmationSentAt: null,
      userMetadata: confirmed ? { ...attrs.user_metadata, email_verified: true } : { ...attrs.user_metadata },
      appMetadata: { ...attrs.app_metadata, ...EMAIL_APP_METADATA },
      now,
    });
    if (!created) throw authErrors.emailExists();
    return toUser(created);
  }

  /** DELETE /admin/users/:id. */
  async delete(caller: Caller, id: string, softDelete: boolean): Promise<void> {
    await this.auth.requireAdmin(caller);
    checkUserId(id);
    const deleted = await (softDelete ? this.users.softDeleteUser(id, new Date(this.clock())) : this.users.deleteUser(id)).catch(
      (err: { code?: string }) => {
        // An app table referencing auth.users without ON DELETE CASCADE / SET NULL blocks the delete.
        if (err.code === '23503') throw authErrors.unexpected('Database error deleting user');
        throw err;
      },
    );
    if (!deleted) throw authErrors.userNotFound();
  }
}
