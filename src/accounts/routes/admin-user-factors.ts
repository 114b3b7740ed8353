import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { originOf } from '../audit.js';
import {
  type AccessCheck,
  type StepUp,
  MFA_ENROLLMENT_REQUIRED,
  callers,
  requireAccessToken,
  requireRecentAuthentication,
} from '../auth.js';
import type { Factors } from '../factors.js';
import { BEARER_SECURITY, BearerHeader, Errors, ReauthenticationRequired, STEP_UP_NOTE } from './schemas.js';

const UserParams = Type.Object({ id: Type.String({ format: 'uuid', description: 'The user’s id' }) });

export const FACTORS_RESET = 'Second factors reset';
export const NO_FACTORS_TO_RESET = 'This user has no second factor; nothing changed';

/** An admin turns off another user's (or their own) two-step sign-in. */
export async function adminUserFactorsRoutes(
  app: App,
  { factors, access, stepUp }: { factors: Factors; access: AccessCheck; stepUp: StepUp },
): Promise<void> {
  // A valid token, then role admin (docs/accounts.md, rule 6), then a recent sign-in: a stolen
  // admin token alone must not strip a user's second factor.
  requireAccessToken(app, { ...access, role: 'admin' });
  requireRecentAuthentication(app, stepUp);
  app.delete(
    '/admin/users/:id/factors',
    {
      schema: {
        tags: ['admin'],
        security: BEARER_SECURITY,
        summary: 'Turn off a user’s two-step sign-in: TOTP, recovery codes and passkeys (role admin only)',
        description:
          `${BearerHeader.description} ${STEP_UP_NOTE} ` +
          'The user’s sessions end and their tokens stop working; the user is mailed and signs in with the password alone. ' +
          'A user without a factor: 200 with `reset: false`, nothing changed.',
        params: UserParams,
        response: {
          200: envelope(
            Type.Object(
              { reset: Type.Boolean({ description: 'true when a factor was on and is now off; false when there was none' }) },
              { additionalProperties: false },
            ),
          ),
          400: Errors.invalid('params/id must match format "uuid"'),
          401: ReauthenticationRequired,
          403: described(
            ErrorEnvelope,
            'The token’s user is not an admin, or (REQUIRE_ADMIN_MFA) is an admin without a second factor',
            statusEnvelope(403, MFA_ENROLLMENT_REQUIRED),
          ),
          404: described(ErrorEnvelope, 'No user has this id', statusEnvelope(404, 'User not found')),
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request) => {
      const reset = await factors.resetByAdmin(callers.get(request).id, request.params.id, originOf(request));
      return dataEnvelope(200, reset ? FACTORS_RESET : NO_FACTORS_TO_RESET, { reset });
    },
  );
}
