import { type Static, Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import type { Es256Keys } from '../signing-keys.js';

export const NO_PUBLIC_KEYS = 'No public keys: access tokens are signed with HS256 (JWT_ALGORITHM).';

// Long enough that verifiers do not fetch per token, short enough that a key published ahead of a
// rotation reaches shared caches within the wait docs/accounts.md prescribes.
const CACHE_CONTROL = 'public, max-age=300';

const PublicJwk = Type.Object(
  {
    kty: Type.Literal('EC'),
    crv: Type.Literal('P-256'),
    x: Type.String(),
    y: Type.String(),
    kid: Type.String({ description: 'RFC 7638 thumbprint of the key; the kid of the tokens it signed' }),
    alg: Type.Literal('ES256'),
    use: Type.Literal('sig'),
    key_ops: Type.Array(Type.Literal('verify')),
  },
  { additionalProperties: false },
);
const KeySet = Type.Object({ keys: Type.Array(PublicJwk) }, { additionalProperties: false });

/** Public: the keys that verify access tokens. `keys` is undefined with HS256, whose secret is never published. */
export async function jwksRoute(app: App, { keys }: { keys: Es256Keys | undefined }): Promise<void> {
  app.get(
    '/.well-known/jwks.json',
    {
      schema: {
        tags: ['auth'],
        summary: 'Public keys that verify access tokens (JWT_ALGORITHM=ES256)',
        description:
          'The current signing key first, then the keys of JWT_PREVIOUS_PUBLIC_KEYS, whose tokens still verify until they expire. ' +
          `Cache-Control: ${CACHE_CONTROL}.`,
        response: {
          200: KeySet,
          404: described(ErrorEnvelope, 'JWT_ALGORITHM is HS256: nothing public verifies its tokens', statusEnvelope(404, NO_PUBLIC_KEYS)),
        },
      },
    },
    async (_request, reply) => {
      if (!keys) return reply.code(404).send(statusEnvelope(404, NO_PUBLIC_KEYS));
      return reply.header('cache-control', CACHE_CONTROL).send(keys.jwks() as Static<typeof KeySet>);
    },
  );
}
