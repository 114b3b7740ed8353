import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import { described } from '../../../kit/http/openapi.js';
import { callers } from '../../gateway.js';
import { AuthErrorSchema, JsonObject, USER_SECURITY, UserSchema, authErrorResponses, mailLimited } from '../schemas.js';
import type { Authentication } from '../authentication.js';
import type { UserUpdates } from '../user-update.js';

// The caller's own user:
//   GET /user    the caller's user
//   PUT /user    the caller changes their own password, metadata or email address

const UserUpdateBody = Type.Object({
  email: Type.Optional(
    Type.String({
      description: 'A new address: taken at once with IDP_AUTOCONFIRM, else pending (new_email) until both addresses confirm by mail',
    }),
  ),
  phone: Type.Optional(Type.String()),
  password: Type.Optional(Type.String()),
  nonce: Type.Optional(
    Type.String({
      description:
        'The code GET /reauthenticate mailed: required with a password from a session older than a day (reauthentication_needed)',
    }),
  ),
  data: Type.Optional(JsonObject),
});

const userUpdateRefused = described(
  AuthErrorSchema,
  'Refused by a rule (same_password, weak_password, email_exists for a new address, reauthentication_not_valid for a wrong nonce)',
  {
    code: 'same_password',
    message: 'New password should be different from the old password.',
  },
);

export function userRoutes(scope: App, { authentication, self }: { authentication: Authentication; self: UserUpdates }): void {
  scope.get(
    '/user',
    {
      schema: {
        tags: ['auth'],
        summary: "The caller's user",
        security: USER_SECURITY,
        response: { 200: UserSchema, ...authErrorResponses },
      },
    },
    async (request) => authentication.getUser(callers.get(request)),
  );

  scope.put(
    '/user',
    {
      config: { goParams: 'UserUpdateParams' },
      schema: {
        tags: ['auth'],
        summary: "Change the caller's password, metadata (data, merged into user_metadata) or email address",
        security: USER_SECURITY,
        querystring: Type.Object({ redirect_to: Type.Optional(Type.String({ description: 'Where the email change links lead' })) }),
        body: Type.Optional(UserUpdateBody),
        response: { 200: UserSchema, ...authErrorResponses, 422: userUpdateRefused, 429: mailLimited },
      },
    },
    async (request) => self.update(callers.get(request), request.body ?? {}, request.query.redirect_to, request.ip),
  );
}
