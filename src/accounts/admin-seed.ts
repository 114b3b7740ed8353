import type { AccountsConfig } from './config.js';
import type { PasswordHasher } from '../kit/password-hasher.js';
import { accountsPasswordHasher } from './passwords.js';
import type { UsersRepository } from './repository.js';
import { emailProblem, normalizeEmail, passwordProblem } from './validation.js';

export interface SeedLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export type SeedOutcome = 'created' | 'exists' | 'skipped';

export const ADMIN_NAME = 'Administrator';

/**
 * Makes sure the configured admin exists. Both ADMIN_EMAIL and ADMIN_PASSWORD
 * are needed; there is no default password. An account that already has the
 * address is left exactly as it is (never promoted, never re-passworded), so
 * a restart cannot undo what an operator changed.
 *
 * @throws Error when the configured email or password breaks the account rules.
 */
export async function seedAdmin(
  users: UsersRepository,
  config: Pick<AccountsConfig, 'ADMIN_EMAIL' | 'ADMIN_PASSWORD'>,
  log: SeedLog,
  passwords?: PasswordHasher,
): Promise<SeedOutcome> {
  if (!config.ADMIN_EMAIL || !config.ADMIN_PASSWORD) {
    // A restart without the variables is normal once the admin exists; only a service with no admin at all is worth a
    // warning. Not being able to tell (the database away) does not stop a start that needs nothing from it.
    const admins = await users.countAdmins().catch(() => undefined);
    if (admins === undefined) {
      log.warn(
        { event: 'admin_seed_skipped' },
        'ADMIN_EMAIL and ADMIN_PASSWORD are not both set, and the admin accounts could not be counted',
      );
      return 'skipped';
    }
    if (admins > 0) {
      log.info(
        { event: 'admin_seed_skipped', admins },
        `ADMIN_EMAIL and ADMIN_PASSWORD are not both set: no admin created; ${admins} admin account(s) exist`,
      );
    } else {
      log.warn({ event: 'admin_seed_skipped', admins }, 'ADMIN_EMAIL and ADMIN_PASSWORD are not both set, and there is no admin account');
    }
    return 'skipped';
  }
  const email = normalizeEmail(config.ADMIN_EMAIL);
  const emailIssue = emailProblem(email);
  if (emailIssue) throw new Error(`ADMIN_EMAIL ${emailIssue}`);
  const passwordIssue = passwordProblem(config.ADMIN_PASSWORD);
  if (passwordIssue) throw new Error(`ADMIN_PASSWORD ${passwordIssue}`);

  const existing = await users.findUserByEmail(email);
  if (!existing) {
    const hasher = passwords ?? accountsPasswordHasher({ workers: 1 });
    let passwordHash: string;
    try {
      passwordHash = await hasher.hash(config.ADMIN_PASSWORD);
    } finally {
      if (!passwords) await hasher.close();
    }
    // The operator chose this address: it counts as verified (REQUIRE_EMAIL_VERIFICATION).
    const created = await users.insertUserIfAbsent({ name: ADMIN_NAME, email, passwordHash, role: 'admin' }, true);
    if (created) {
      log.info({ event: 'admin_created', userId: created.id }, 'admin account created from ADMIN_EMAIL');
      return 'created';
    }
  }
  const account = existing ?? (await users.findUserByEmail(email));
  if (account?.role === 'admin') {
    log.info({ event: 'admin_exists', userId: account.id }, 'the admin account of ADMIN_EMAIL already exists: left as it is');
  } else {
    // Promoting it would hand admin rights to whoever registered the address first.
    log.warn(
      { event: 'admin_email_taken', userId: account?.id, role: account?.role },
      'an account with ADMIN_EMAIL already exists and is not an admin: left as it is, so no admin was created',
    );
  }
  return 'exists';
}
