import { Type } from '@sinclair/typebox';
import type { App } from '../../../kit/http/app.js';
import type { SigningKeys } from '../../keys.js';

/** The public keys that verify access tokens; public like Supabase's, so registered outside the gateway. */
export async function jwksRoute(app: App, { keys }: { keys: SigningKeys }): Promise<void> {
  app.get(
    '/auth/v1/.well-known/jwks.json',
    {
      schema: {
        tags: ['auth'],
        summary: 'Public keys that verify access tokens',
        response: { 200: Type.Object({ keys: Type.Array(Type.Object({}, { additionalProperties: true })) }) },
      },
    },
    async (_request, reply) => reply.header('cache-control', 'public, max-age=600').send(keys.jwks()),
  );
}
