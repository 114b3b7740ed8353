// The User object exactly as GoTrue serialises models.User (Go encoding/json): unset timestamps are
// omitted, set ones are RFC 3339 in UTC with trailing zeros of the fraction dropped.

export interface IdentityRow {
  identity_id: string;
  id: string;
  user_id: string;
  identity_data: Record<string, unknown>;
  provider: string;
  last_sign_in_at: string | null;
  created_at: string;
  updated_at: string;
  email: string | null;
}

export interface UserRow {
  id: string;
  aud: string | null;
  role: string | null;
  email: string | null;
  phone: string | null;
  encrypted_password: string | null;
  email_confirmed_at: Date | null;
  phone_confirmed_at: Date | null;
  confirmed_at: Date | null;
  confirmation_sent_at: Date | null;
  recovery_sent_at: Date | null;
  invited_at: Date | null;
  email_change: string | null;
  email_change_sent_at: Date | null;
  email_change_confirm_status: number;
  last_sign_in_at: Date | null;
  raw_app_meta_data: Record<string, unknown>;
  raw_user_meta_data: Record<string, unknown>;
  banned_until: Date | null;
  deleted_at: Date | null;
  is_anonymous: boolean;
  created_at: Date;
  updated_at: Date;
  identities: IdentityRow[];
  factors: FactorRow[];
}

/** A factor as the user's query returns it (times as JSON strings). */
export interface FactorRow {
  id: string;
  friendly_name: string | null;
  factor_type: string;
  status: 'verified' | 'unverified';
  created_at: Date | string;
  updated_at: Date | string;
  last_challenged_at: Date | string | null;
}

/** GoTrue's models.Factor as it serialises it (phone is "" for a TOTP factor). */
export interface Factor {
  id: string;
  friendly_name?: string;
  factor_type: string;
  status: 'verified' | 'unverified';
  created_at: string;
  updated_at: string;
  phone: string;
  last_challenged_at: string | null;
}

export interface Identity {
  identity_id: string;
  id: string;
  user_id: string;
  identity_data: Record<string, unknown>;
  provider: string;
  last_sign_in_at?: string;
  created_at: string;
  updated_at: string;
  email?: string;
}

export interface User {
  id: string;
  aud: string;
  role: string;
  email: string;
  phone: string;
  email_confirmed_at?: string;
  phone_confirmed_at?: string;
  confirmed_at?: string;
  confirmation_sent_at?: string;
  recovery_sent_at?: string;
  invited_at?: string;
  new_email?: string;
  email_change_sent_at?: string;
  last_sign_in_at?: string;
  banned_until?: string;
  deleted_at?: string;
  app_metadata: Record<string, unknown>;
  user_metadata: Record<string, unknown>;
  identities: Identity[];
  /** Omitted when the user has none, as GoTrue's omitempty does. */
  factors?: Factor[];
  created_at: string;
  updated_at: string;
  is_anonymous: boolean;
}

/** The app_metadata of a user with an email identity, as GoTrue sets it. */
export const EMAIL_APP_METADATA = { provider: 'email', providers: ['email'] };

/** Go's RFC3339Nano for a UTC instant: `2026-01-01T10:00:00.12Z`, `2026-01-01T10:00:00Z`. */
export function goTime(value: Date | string): string {
  const iso = (value instanceof Date ? value : new Date(value)).toISOString();
  return iso.replace(/\.(\d*?)0*Z$/, (_m, digits: string) => (digits ? `.${digits}Z` : 'Z'));
}

const optionalTime = (value: Date | string | null | undefined) => (value ? goTime(value) : undefined);

function toIdentity(row: IdentityRow): Identity {
  return {
    identity_id: row.identity_id,
    id: row.id,
    user_id: row.user_id,
    identity_data: row.identity_data,
    provider: row.provider,
    last_sign_in_at: optionalTime(row.last_sign_in_at),
    created_at: goTime(row.created_at),
    updated_at: goTime(row.updated_at),
    email: row.email ?? undefined,
  };
}

export function toFactor(row: FactorRow): Factor {
  return {
    id: row.id,
    friendly_name: row.friendly_name || undefined,
    factor_type: row.factor_type,
    status: row.status,
    created_at: goTime(row.created_at),
    updated_at: goTime(row.updated_at),
    phone: '',
    last_challenged_at: row.last_challenged_at ? goTime(row.last_challenged_at) : null,
  };
}

export function toUser(row: UserRow): User {
  return {
    id: row.id,
    aud: row.aud ?? '',
    role: row.role ?? '',
    email: row.email ?? '',
    phone: row.phone ?? '',
    email_confirmed_at: optionalTime(row.email_confirmed_at),
    phone_confirmed_at: optionalTime(row.phone_confirmed_at),
    confirmed_at: optionalTime(row.confirmed_at),
    confirmation_sent_at: optionalTime(row.confirmation_sent_at),
    recovery_sent_at: optionalTime(row.recovery_sent_at),
    invited_at: optionalTime(row.invited_at),
    new_email: row.email_change ?? undefined,
    email_change_sent_at: optionalTime(row.email_change_sent_at),
    last_sign_in_at: optionalTime(row.last_sign_in_at),
    banned_until: optionalTime(row.banned_until),
    deleted_at: optionalTime(row.deleted_at),
    app_metadata: row.raw_app_meta_data,
    user_metadata: row.raw_user_meta_data,
    identities: row.identities.map(toIdentity),
    factors: row.factors.length > 0 ? row.factors.map(toFactor) : undefined,
    created_at: goTime(row.created_at),
    updated_at: goTime(row.updated_at),
    is_anonymous: row.is_anonymous,
  };
}
