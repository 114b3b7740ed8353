import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { callers } from '../gateway.js';
import type { AdminUsers, UserPage } from './admin-users.js';
import {
  AdminUserBody,
  AuthErrorSchema,
  JsonObject,
  KEY_SECURITY,
  USER_SECURITY,
  UserSchema,
  authErrorResponses,
  mailLimited,
} from './schemas.js';
import type { UserUpdates } from './user-update.js';

// The user endpoints of GoTrue beyond sign-up and sign-in, registered inside authRoutes (same
// gateway and error handling):
//   GET /admin/users?page=&per_page=   list users (secret key), GoTrue's paging headers
//   GET /admin/users/:id               one user (secret key)
//   PUT /admin/users/:id               change a user: email, password, metadata, ban (secret key)
//   PUT /user                          the caller changes their own password and metadata
//   GET /reauthenticate                mails the caller the nonce a password change may need

const UserId = Type.Object({ id: Type.String({ description: 'The user id (a UUID)' }) });

const AdminUpdateBody = Type.Object({
  ...AdminUserBody.properties,
  ban_duration: Type.Optional(Type.String({ description: 'A Go duration ("24h", "1h30m") from now; "none" lifts the ban' })),
});

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

const adminUpdateRefused = described(AuthErrorSchema, 'Refused by a rule (email_exists, weak_password)', {
  code: 'email_exists',
  message: 'A user with this email address has already been registered',
});
const userUpdateRefused = described(
  AuthErrorSchema,
  'Refused by a rule (same_password, weak_password, email_exists for a new address, reauthentication_not_valid for a wrong nonce)',
  {
    code: 'same_password',
    message: 'New password should be different from the old password.',
  },
);

const UserList = described(
  Type.Object({ users: Type.Array(UserSchema), aud: Type.String() }),
  'One page of users, newest first. X-Total-Count is the number of users; Link has rel="next" (when there is a next page) and rel="last".',
);

/**
 * GoTrue's paging headers: the request's own URL with `page` set to the next and to the last page
 * (query keys sorted, as Go encodes them), and the total.
 */
function pagingHeaders(request: FastifyRequest, page: UserPage): { link: string; total: string } {
  const [path, search = ''] = request.url.split('?', 2) as [string, string?];
  const lastPage = Math.ceil(page.total / page.perPage);
  const urlFor = (target: number) => {
    const query = new URLSearchParams(search);
    query.set('page', String(target));
    query.sort();
    return `<${path}?${query.toString()}>`;
  };
  const links = [];
  if (lastPage > page.page) links.push(`${urlFor(page.page + 1)}; rel="next"`);
  links.push(`${urlFor(lastPage)}; rel="last"`);
  return { link: links.join(', '), total: String(page.total) };
}

export async function userRoutes(scope: App, { admin, self }: { admin: AdminUsers; self: UserUpdates }): Promise<void> {
  scope.get(
    '/admin/users',
    {
      schema: {
        tags: ['admin'],
        summary: 'List users (secret key)',
        security: KEY_SECURITY,
        querystring: Type.Object({
          page: Type.Optional(Type.String({ description: 'From 1; default 1' })),
          per_page: Type.Optional(Type.String({ description: 'Default 50, at most 1000' })),
        }),
        response: { 200: UserList, ...authErrorResponses },
      },
    },
    async (request, reply) => {
      const page = await admin.list(callers.get(request), request.query);
      const headers = pagingHeaders(request, page);
      reply.header('link', headers.link).header('x-total-count', headers.total);
      return { users: page.users, aud: page.aud };
    },
  );

  scope.get(
    '/admin/users/:id',
    {
      schema: {
        tags: ['admin'],
        summary: 'One user (secret key)',
        security: KEY_SECURITY,
        params: UserId,
        response: { 200: UserSchema, ...authErrorResponses },
      },
    },
    async (request) => admin.get(callers.get(request), request.params.id),
  );

  scope.put(
    '/admin/users/:id',
    {
      schema: {
        tags: ['admin'],
        summary: 'Change a user (secret key): email, password, metadata (merged), confirmation, ban',
        security: KEY_SECURITY,
        params: UserId,
        body: Type.Optional(AdminUpdateBody),
        response: { 200: UserSchema, ...authErrorResponses, 422: adminUpdateRefused },
      },
    },
    async (request) => admin.update(callers.get(request), request.params.id, request.body ?? {}),
  );

  scope.put(
    '/user',
    {
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

  scope.get(
    '/reauthenticate',
    {
      schema: {
        tags: ['auth'],
        summary: 'Mail the caller a six-digit nonce, which PUT /user needs with a password from a session older than a day',
        security: USER_SECURITY,
        response: { 200: Type.Object({}), ...authErrorResponses, 429: mailLimited },
      },
    },
    async (request) => self.reauthenticate(callers.get(request)),
  );
}
