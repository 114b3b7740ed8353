import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { originOf } from '../audit.js';
import { type AccessCheck, type StepUp, callers, requireAccessToken, requireRecentAuthentication } from '../auth.js';
import type { UserAdministration } from '../user-admin.js';
import { BEARER_SECURITY, BearerHeader, Done, Errors, PublicUser, ReauthenticationRequired, STEP_UP_NOTE } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';

const UserParams = Type.Object({ id: Type.String({ format: 'uuid', description: 'The user’s id' }) });

const ChangeBody = Type.Object(
  {
    role: Type.Optional(Type.Union([Type.Literal('user'), Type.Literal('admin')])),
    banned: Type.Optional(Type.Boolean({ description: 'true bans (no login, no refresh), false lifts the ban' })),
  },
  { additionalProperties: false, minProperties: 1 },
);

const userNotFound = described(ErrorEnvelope, 'No user has this id', statusEnvelope(404, 'User not found'));
const lastAdmin = described(
  ErrorEnvelope,
  'It would leave no usable admin',
  statusEnvelope(409, 'The last admin cannot be demoted, banned or deleted.'),
);

/** Changing and deleting accounts. */
export async function adminUserChangesRoutes(
  app: App,
  { admin, access, stepUp }: { admin: UserAdministration; access: AccessCheck; stepUp: StepUp },
): Promise<void> {
  // A valid token, then role admin (docs/accounts.md, rule 6), then a recent sign-in: a stolen
  // admin token alone must not ban, demote or delete anyone. The contract's listing
  // (GET /admin/users) is in another scope and keeps working for the token's whole life.
  requireAccessToken(app, { ...access, role: 'admin' });
  requireRecentAuthentication(app, stepUp);
  app.patch(
    '/admin/users/:id',
    {
      schema: {
        tags: ['admin'],
        security: BEARER_SECURITY,
        summary: 'Change a user’s role or ban (role admin only); takes effect at once',
        description:
          `${BearerHeader.description} A role change or a ban ends the user’s sessions and refuses the access tokens they hold. ` +
          `The last usable admin cannot be demoted or banned (409). ${STEP_UP_NOTE}`,
        params: UserParams,
        body: ChangeBody,
        response: {
          200: envelope(Type.Object({ user: PublicUser, banned: Type.Boolean() })),
          400: Errors.invalid('body must NOT have fewer than 1 properties'),
          401: ReauthenticationRequired,
          403: Errors.forbidden,
          404: userNotFound,
          409: lastAdmin,
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const after = await admin.update(callers.get(request).id, request.params.id, request.body, originOf(request));
      return dataEnvelope(200, 'User updated', { user: after.user, banned: after.banned });
    },
  );

  app.delete(
    '/admin/users/:id',
    {
      schema: {
        tags: ['admin'],
        security: BEARER_SECURITY,
        summary: 'Delete a user (role admin only); their sessions and tokens stop working at once',
        description: `${BearerHeader.description} The last usable admin cannot be deleted (409). The audit log keeps its entries. ${STEP_UP_NOTE}`,
        params: UserParams,
        response: {
          200: described(Done, 'The user is deleted', statusEnvelope(200, 'User deleted')),
          400: Errors.invalid('params/id must match format "uuid"'),
          401: ReauthenticationRequired,
          403: Errors.forbidden,
          404: userNotFound,
          409: lastAdmin,
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      await admin.delete(callers.get(request).id, request.params.id, originOf(request));
      return statusEnvelope(200, 'User deleted');
    },
  );
}
