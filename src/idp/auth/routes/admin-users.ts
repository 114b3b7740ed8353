import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { App } from '../../../kit/http/app.js';
import { described } from '../../../kit/http/openapi.js';
import { callers } from '../../gateway.js';
import type { AdminUsers, UserPage } from '../admin-users.js';
import { AdminUserBody, AuthErrorSchema, KEY_SECURITY, UserSchema, authErrorResponses } from '../schemas.js';

// GoTrue's user administration (secret key):
//   POST   /admin/users                      create a user
//   DELETE /admin/users/:id                  delete a user (should_soft_delete keeps the row)
//   GET    /admin/users?page=&per_page=      list users, GoTrue's paging headers
//   GET    /admin/users/:id                  one user
//   PUT    /admin/users/:id                  change a user: email, password, metadata, ban

const UserId = Type.Object({ id: Type.String({ description: 'The user id (a UUID)' }) });

const AdminUpdateBody = Type.Object({
  ...AdminUserBody.properties,
  ban_duration: Type.Optional(Type.String({ description: 'A Go duration ("24h", "1h30m") from now; "none" lifts the ban' })),
});

const adminUpdateRefused = described(AuthErrorSchema, 'Refused by a rule (email_exists, weak_password)', {
  code: 'email_exists',
  message: 'A user with this email address has already been registered',
});

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

export function adminUserRoutes(scope: App, { admin }: { admin: AdminUsers }): void {
  scope.post(
    '/admin/users',
    {
      config: { goParams: 'AdminUserParams' },
      schema: {
        tags: ['admin'],
        summary: 'Create a user (secret key)',
        description: 'Needs the secret key as apikey (and, as supabase-js sends it, as the bearer token).',
        security: KEY_SECURITY,
        body: Type.Optional(AdminUserBody),
        response: { 200: UserSchema, ...authErrorResponses },
      },
    },
    async (request) => admin.create(callers.get(request), request.body ?? {}),
  );

  scope.delete(
    '/admin/users/:id',
    {
      config: { goParams: 'adminUserDeleteParams' },
      schema: {
        tags: ['admin'],
        summary: 'Delete a user (secret key); should_soft_delete keeps the row',
        security: KEY_SECURITY,
        params: Type.Object({ id: Type.String({ description: 'The user id (a UUID)' }) }),
        body: Type.Optional(Type.Object({ should_soft_delete: Type.Optional(Type.Boolean()) })),
        response: { 200: described(Type.Object({}), 'Deleted'), ...authErrorResponses },
      },
    },
    async (request) => {
      await admin.delete(callers.get(request), request.params.id, request.body?.should_soft_delete === true);
      return {};
    },
  );

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
      config: { goParams: 'AdminUserParams' },
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
}
