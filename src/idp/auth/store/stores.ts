import { type Pool, type PoolClient, withTransaction } from '../../../kit/db.js';
import { FlowStateStore } from './flow-states.js';
import { MfaStore } from './mfa.js';
import { OneTimeTokenStore } from './one-time-tokens.js';
import { SessionStore } from './sessions.js';
import { UserStore } from './users.js';

/** The auth schema's stores, one per GoTrue model, on one pool; a transaction spans any of them. */
export class AuthStores {
  readonly users: UserStore;
  readonly sessions: SessionStore;
  readonly oneTimeTokens: OneTimeTokenStore;
  readonly flowStates: FlowStateStore;
  readonly mfa: MfaStore;

  constructor(private readonly pool: Pool) {
    this.users = new UserStore(pool);
    this.sessions = new SessionStore(pool);
    this.oneTimeTokens = new OneTimeTokenStore(pool);
    this.flowStates = new FlowStateStore(pool);
    this.mfa = new MfaStore(pool);
  }

  async transaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    return withTransaction(this.pool, fn);
  }
}
