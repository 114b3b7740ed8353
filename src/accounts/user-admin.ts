import type { Clock } from '../kit/clock.js';
import { type Pool, type PoolClient, withTransaction } from '../kit/db.js';
import { HttpError, notFound } from '../kit/http/errors.js';
import type { AuditLog, Origin } from './audit.js';
import type { Account, Role, UsersRepository } from './repository.js';
import { USER_NOT_FOUND } from './service.js';
import type { Sessions } from './sessions.js';

export const LAST_ADMIN = 'The last admin cannot be demoted, banned or deleted.';

export interface AccountChange {
  role?: Role;
  banned?: boolean;
}

/**
 * What an admin does to other accounts: change the role, ban, delete. Each
 * takes effect at once (the target's sessions end and its access tokens are
 * cut off) and is audited in the same transaction. At least one usable admin
 * always remains: the admins' rows are locked before that is decided, so two
 * admins demoting each other at once leave one.
 */
export class UserAdministration {
  constructor(
    private readonly pool: Pool,
    private readonly users: UsersRepository,
    private readonly sessions: Sessions,
    private readonly audit: AuditLog,
    private readonly clock: Clock,
  ) {}

  async update(actorId: string, targetId: string, change: AccountChange, origin: Origin): Promise<Account> {
    return withTransaction(this.pool, async (db) => {
      const before = await this.lockTarget(db, targetId, change.role === 'user' || change.banned === true);
      const roleChanges = change.role !== undefined && change.role !== before.user.role;
      const banChanges = change.banned !== undefined && change.banned !== before.banned;
      if (!roleChanges && !banChanges) return before;
      const after = await this.users.updateAccount(db, targetId, change, this.clock());
      // The role is in every access token, and a banned user must lose access now.
      if (roleChanges || change.banned === true) {
        after.accessTokensFrom = await this.sessions.revokeEverything(db, targetId, roleChanges ? 'role_changed' : 'banned');
      }
      const entry = { actorId, targetId, origin };
      if (roleChanges)
        await this.audit.record({ ...entry, event: 'role_changed', details: { from: before.user.role, to: after.user.role } }, db);
      if (banChanges) await this.audit.record({ ...entry, event: change.banned ? 'user_banned' : 'user_unbanned' }, db);
      return after;
    });
  }

  async delete(actorId: string, targetId: string, origin: Origin): Promise<void> {
    await withTransaction(this.pool, async (db) => {
      const target = await this.lockTarget(db, targetId, true);
      // Its sessions go with it (ON DELETE CASCADE); its tokens find no user any more.
      await this.users.deleteUser(db, targetId);
      await this.audit.record({ event: 'user_deleted', actorId, targetId, origin, details: { role: target.user.role } }, db);
    });
  }

  /**
   * The target, locked. When the change could remove an admin, every active
   * admin is locked first (always in the same order), and the change is refused
   * if the target is the only one.
   */
  private async lockTarget(db: PoolClient, targetId: string, removesAnAdmin: boolean): Promise<Account> {
    const admins = removesAnAdmin ? await this.users.lockActiveAdmins(db) : [];
    const target = await this.users.lockAccount(db, targetId, 'update');
    if (!target) throw notFound(USER_NOT_FOUND);
    if (removesAnAdmin && admins.length === 1 && admins[0] === targetId) throw new HttpError(409, LAST_ADMIN);
    return target;
  }
}
