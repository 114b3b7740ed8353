import { HttpError } from '../../kit/errors.js';
import type { App } from '../../kit/http.js';
import type { Identity } from '../identity.js';
import { Credentials, ErrorMessage, Errors, LoginSession, RegisteredUser } from '../schemas.js';
import { described } from '../../kit/openapi.js';

// Public routes: sign-up and login, forwarded to the identity provider with the caller's address
// (request.ip, which believes X-Forwarded-For only from TRUST_PROXY), so that the provider's
// per-address limits count each end user rather than this service.

// The spec fixes one message for a missing email or password; the schema decides
// what "missing" is (absent, empty or not a string) and this turns its verdict into that text.
const credentialsRequired = () => new HttpError(400, 'email and password are required');

export async function authRoutes(app: App, identity: Identity): Promise<void> {
  app.post(
    '/register',
    {
      attachValidation: true,
      schema: {
        tags: ['auth'],
        summary: 'Create a user at the identity provider',
        body: Credentials,
        response: {
          201: RegisteredUser,
          400: Errors.invalid('email and password are required'),
          413: Errors.tooLarge,
          415: Errors.mediaType,
          429: Errors.rateLimited,
          503: Errors.unavailable,
        },
      },
    },
    async (request, reply) => {
      if (request.validationError) throw credentialsRequired();
      return reply.code(201).send(await identity.register(request.body, request.ip));
    },
  );

  app.post(
    '/login',
    {
      attachValidation: true,
      schema: {
        tags: ['auth'],
        summary: 'Exchange email and password for a session',
        body: Credentials,
        response: {
          200: LoginSession,
          400: Errors.invalid('email and password are required'),
          401: described(ErrorMessage, 'No user with this email and password', { message: 'Invalid login credentials' }),
          413: Errors.tooLarge,
          415: Errors.mediaType,
          429: Errors.rateLimited,
          503: Errors.unavailable,
        },
      },
    },
    async (request) => {
      if (request.validationError) throw credentialsRequired();
      return identity.login(request.body, request.ip);
    },
  );
}
