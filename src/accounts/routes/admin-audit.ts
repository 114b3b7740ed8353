import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { AUDIT_EVENTS, type AuditLog } from '../audit.js';
import { type AccessCheck, requireAccessToken } from '../auth.js';
import { BEARER_SECURITY, BearerHeader, Errors } from './schemas.js';
import { paginationLinks } from '../../kit/http/pagination.js';
import { ListQuery } from './admin-users.js';

const AuditQuery = Type.Object(
  {
    ...ListQuery.properties,
    user_id: Type.Optional(Type.String({ format: 'uuid', description: 'Entries where this user acted or was acted upon' })),
    event: Type.Optional(
      Type.Union(
        AUDIT_EVENTS.map((e) => Type.Literal(e)),
        { description: 'Entries of this event only' },
      ),
    ),
  },
  { additionalProperties: false },
);

const AuditEntry = Type.Object(
  {
    id: Type.Integer(),
    at: Type.String({ format: 'date-time' }),
    event: Type.String(),
    actor_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    target_id: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    ip: Type.Union([Type.String(), Type.Null()]),
    user_agent: Type.Union([Type.String(), Type.Null()]),
    details: Type.Record(Type.String(), Type.String()),
  },
  { additionalProperties: false },
);

export async function adminAuditRoute(app: App, { audit, access }: { audit: AuditLog; access: AccessCheck }): Promise<void> {
  // A valid token, then role admin (docs/accounts.md, rule 6).
  requireAccessToken(app, { ...access, role: 'admin' });
  app.get(
    '/admin/audit',
    {
      schema: {
        tags: ['admin'],
        security: BEARER_SECURITY,
        summary: 'The audit log, newest first (role admin only)',
        description: `${BearerHeader.description} The body is a bare array; the total is in X-Total-Count and the other pages in Link.`,
        querystring: AuditQuery,
        response: {
          200: Type.Array(AuditEntry, { description: 'One page of audit entries (X-Total-Count, Link)' }),
          400: Errors.invalid('querystring/user_id must match format "uuid"'),
          401: Errors.noToken,
          403: Errors.forbidden,
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request, reply) => {
      const { page, per_page: perPage, user_id: userId, event } = request.query;
      const { total, entries } = await audit.page({ limit: perPage, offset: (page - 1) * perPage, userId, event });
      const lastPage = Math.max(1, Math.ceil(total / perPage));
      const links = paginationLinks('/admin/audit', { page, perPage, lastPage }, { user_id: userId, event });
      void reply.header('x-total-count', String(total)).header('link', links);
      return entries;
    },
  );
}
