import type { Clock } from '../../kit/clock.js';
import type { Caller } from '../gateway.js';
import { ACCESS_TOKEN_AUDIENCE, type SigningKeys, type TokenProblem, type VerifiedClaims } from '../keys.js';
import { authErrors } from './errors.js';
import type { Passwords } from './passwords.js';
import type { Sessions, TokenResponse } from './sessions.js';
import type { SessionRow, SessionStore } from './store/sessions.js';
import type { UserStore } from './store/users.js';
import { toUser, type User, type UserRow } from './user.js';

// Who is calling: a password sign-in (GoTrue's password grant), and the bearer token of every other
// request, verified and loaded with its user and session (GoTrue's requireAuthentication), or
// checked for an admin role (requireAdmin).

const ADMIN_ROLES = new Set(['service_role', 'supabase_admin']);
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What GoTrue's JWT library says about a refused token, after "invalid JWT: unable to parse or verify signature, ". */
function jwtReason(problem: TokenProblem): string {
  switch (problem.kind) {
    case 'malformed':
      return `token is malformed: ${problem.reason}`;
    case 'unverifiable':
      return `token is unverifiable: ${problem.reason}`;
    case 'signature':
      return `token signature is invalid: ${problem.reason}`;
    case 'expired':
      return 'token has invalid claims: token is expired';
    case 'not_yet_valid':
      return 'token has invalid claims: token is not valid yet';
    case 'issued_in_future':
      return 'token has invalid claims: token used before issued';
  }
}

export class Authentication {
  constructor(
    private readonly stores: { users: UserStore; sessions: SessionStore },
    private readonly sessions: Sessions,
    private readonly keys: SigningKeys,
    private readonly passwords: Passwords,
    private readonly clock: Clock,
  ) {}

  async signInWithPassword(input: { email?: string; phone?: string; password?: string }): Promise<TokenResponse> {
    const rawEmail = input.email ?? '';
    if (rawEmail === '' && !input.phone) throw authErrors.validation('missing email or phone');
    const password = input.password ?? '';
    // No stored address contains U+0000, and PostgreSQL refuses it even as a parameter (a 500 before).
    // Looked up as sent, lower-cased (GoTrue trims nothing): " a@b.c" is no one's address.
    const lookup = rawEmail === '' || rawEmail.includes('\u0000') ? undefined : rawEmail.toLowerCase();
    const user = lookup === undefined ? undefined : await this.stores.users.findUserByEmail(lookup);
    // Same work and same answer for an unknown address and a wrong password.
    const valid = await this.passwords.verify(password, user?.encrypted_password);
    if (!user || !valid) throw authErrors.invalidCredentials();
    if (user.banned_until !== null && user.banned_until.getTime() > this.clock()) throw authErrors.userBanned();
    if (user.email_confirmed_at === null) throw authErrors.emailNotConfirmed();
    return this.sessions.startWithPassword(user, password);
  }

  /** Verified claims of the caller's bearer JWT, or GoTrue's error for it. */
  private async bearerClaims(caller: Caller): Promise<VerifiedClaims> {
    if (caller.bearer.kind === 'other') throw authErrors.noAuthorization();
    // An opaque key stands for a JWT with only a role, which GoTrue would parse fine and then
    // find without a subject.
    if (caller.bearer.kind === 'key') return { role: caller.keyRole, exp: Number.MAX_SAFE_INTEGER };
    const result = await this.keys.verify(caller.bearer.token);
    if (!result.ok) throw authErrors.badJwt(`invalid JWT: unable to parse or verify signature, ${jwtReason(result.problem)}`);
    return result.claims;
  }

  /** GoTrue's requireAuthentication + user/session loading, in its order. */
  async authenticate(caller: Caller): Promise<{ user: UserRow; session: SessionRow; claims: VerifiedClaims }> {
    const claims = await this.bearerClaims(caller);
    const sub = claims.sub;
    if (typeof sub !== 'string' || sub === '') throw authErrors.badJwt('invalid claim: missing sub claim');
    if (!UUID.test(sub)) throw authErrors.badJwt('invalid claim: sub claim must be a UUID', 400);
    const sessionId = claims.session_id;
    const validSessionId = typeof sessionId === 'string' && UUID.test(sessionId);
    // One query for both; the errors keep GoTrue's order (user, then the claim, then the session).
    const found = await this.stores.sessions.findUserWithSession(sub, validSessionId ? sessionId : undefined);
    if (!found) throw authErrors.userFromSubNotFound();
    if (!validSessionId) throw authErrors.badJwt('invalid claim: session_id claim must be a UUID');
    const { user, session } = found;
    if (!session || session.user_id !== user.id) throw authErrors.sessionNotFound();
    if (user.banned_until !== null && user.banned_until.getTime() > this.clock()) throw authErrors.userBanned(403);
    return { user, session, claims };
  }

  /** GET /user. */
  async getUser(caller: Caller): Promise<User> {
    const { user, claims } = await this.authenticate(caller);
    if (claims.aud !== ACCESS_TOKEN_AUDIENCE) throw authErrors.validation("Token audience doesn't match request audience");
    return toUser(user);
  }

  async requireAdmin(caller: Caller): Promise<void> {
    const claims = await this.bearerClaims(caller);
    if (typeof claims.role !== 'string' || !ADMIN_ROLES.has(claims.role)) throw authErrors.notAdmin();
  }
}
