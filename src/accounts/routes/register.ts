import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import type { AccountsService } from '../service.js';
import { Errors, PublicUser } from './schemas.js';
import { dataEnvelope, envelope, ErrorEnvelope } from '../../kit/http/status-envelope.js';
import { described } from '../../kit/http/openapi.js';
import { originOf } from '../audit.js';

// Unknown properties (`role` included) are dropped by the schema (docs/accounts.md, rule 1).
// Lengths are checked after trimming, in code points, by the service: a schema
// cannot express either.
const RegisterBody = Type.Object(
  {
    name: Type.String({ description: '2 to 60 characters after trimming' }),
    email: Type.String({ description: 'a valid address; stored trimmed and lowercased' }),
    password: Type.String({ description: '8 to 72 characters and at most 72 bytes in UTF-8' }),
  },
  { additionalProperties: false },
);

export async function registerRoute(app: App, { accounts }: { accounts: AccountsService }): Promise<void> {
  app.post(
    '/auth/register',
    {
      schema: {
        tags: ['auth'],
        summary: 'Create an account with role user',
        description:
          'Limited per client IP (REGISTER_MAX_PER_IP per REGISTER_WINDOW, 1000 per hour by default; 429 with Retry-After). ' +
          '503 with Retry-After when the password-hashing queue is full.',
        body: RegisterBody,
        response: {
          201: envelope(PublicUser),
          400: Errors.invalid('An account with this email already exists'),
          429: described(ErrorEnvelope, 'Too many registrations from this client (Retry-After)', {
            status: 429,
            response: 'Too Many Requests',
            message: 'Too many registrations from this address, try again in 3600 seconds.',
          }),
          503: Errors.unavailable('The password-hashing queue is full or the database is unavailable (Retry-After)'),
        },
      },
    },
    async (request, reply) => {
      const user = await accounts.register(request.body, { ...originOf(request), log: request.log });
      return reply.code(201).send(dataEnvelope(201, 'User registered successfully', user));
    },
  );
}
