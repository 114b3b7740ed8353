import { Type } from '@sinclair/typebox';
import { notFound } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { dataEnvelope, envelope, ErrorEnvelope } from '../../kit/http/status-envelope.js';
import { newApiKey } from '../access.js';
import { requireAdminKey } from '../admin-auth.js';
import type { ApiKey, LinkRepository } from '../repository.js';
import { ADMIN_SECURITY } from './schemas.js';

const KeyData = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  role: Type.Union([Type.Literal('author'), Type.Literal('manager')]),
  created_at: Type.String({ format: 'date-time' }),
  last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

const AUTH_ERRORS = {
  401: described(ErrorEnvelope, 'The admin key is missing or wrong (WWW-Authenticate: Bearer)', {
    status: 401,
    response: 'Unauthorized',
    message: 'A valid admin key is required: Authorization: Bearer <SHORTENER_ADMIN_KEY>',
  }),
};

const toData = (key: ApiKey) => ({
  id: key.id,
  name: key.name,
  role: key.role,
  created_at: key.created_at.toISOString(),
  last_used_at: key.last_used_at?.toISOString() ?? null,
  revoked_at: key.revoked_at?.toISOString() ?? null,
});

/** The admin issues, lists and revokes API keys. A key is shown once, at issue; only its digest is kept. */
export async function apiKeysRoutes(app: App, { repo, adminKey }: { repo: LinkRepository; adminKey: string | undefined }): Promise<void> {
  const onRequest = requireAdminKey(adminKey);

  app.post(
    '/api/admin/keys',
    {
      onRequest,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'Issue a named API key: author (its own links) or manager (every link); the key is shown only in this answer',
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 100, pattern: '\\S' }),
            role: Type.Union([Type.Literal('author'), Type.Literal('manager')]),
          },
          { additionalProperties: false },
        ),
        response: {
          201: envelope(Type.Intersect([KeyData, Type.Object({ key: Type.String() })])),
          400: ErrorEnvelope,
          ...AUTH_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const { key, hash } = newApiKey();
      const stored = await repo.insertApiKey(request.body.name.trim(), request.body.role, hash);
      return reply.code(201).send(dataEnvelope(201, 'API key created: it is shown only now', { ...toData(stored), key }));
    },
  );

  app.get(
    '/api/admin/keys',
    {
      onRequest,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'Every API key (never the key itself), with when it was last used',
        response: { 200: envelope(Type.Array(KeyData)), ...AUTH_ERRORS },
      },
    },
    async () => dataEnvelope(200, 'API keys retrieved successfully', (await repo.listApiKeys()).map(toData)),
  );

  app.delete(
    '/api/admin/keys/:id',
    {
      onRequest,
      schema: {
        tags: ['admin'],
        security: ADMIN_SECURITY,
        summary: 'Revoke an API key: it is refused from now on; its links stay, managed by the admin and manager keys',
        params: Type.Object({ id: Type.Integer({ minimum: 1, maximum: 2 ** 53 - 1 }) }),
        response: {
          200: envelope(KeyData),
          400: ErrorEnvelope,
          404: described(ErrorEnvelope, 'No key has this id', { status: 404, response: 'Not Found', message: 'API key not found' }),
          ...AUTH_ERRORS,
        },
      },
    },
    async (request) => {
      const key = await repo.revokeApiKey(request.params.id);
      if (!key) throw notFound('API key not found');
      return dataEnvelope(200, 'API key revoked', toData(key));
    },
  );
}
