import { Type } from '@sinclair/typebox';
import { type ApiDocument, described } from '../../kit/http/openapi.js';
import { ErrorEnvelope } from '../../kit/http/status-envelope.js';
import { CREDENTIALS_REQUIRED, forbidden } from '../access.js';

/** The tags and security scheme of the shortener's OpenAPI document. */
export const SHORTENER_DOCUMENT: ApiDocument = {
  tags: [
    { name: 'links', description: 'Create short links, read their stats and QR codes' },
    { name: 'redirect', description: 'The short URL itself: a counted 302 to the original URL' },
    { name: 'analytics', description: 'Visits of a link over time' },
    { name: 'admin', description: 'Every link, and changes to any of them: needs the admin key' },
  ],
  securitySchemes: {
    adminKey: { type: 'http', scheme: 'bearer', description: 'The SHORTENER_ADMIN_KEY, sent as `Authorization: Bearer <key>`' },
    manageToken: {
      type: 'http',
      scheme: 'bearer',
      description: "A link's manage token, returned once by its create, sent as `Authorization: Bearer <token>`",
    },
  },
};

/** Routes behind the admin key. */
export const ADMIN_SECURITY = [{ adminKey: [] }];

/** Routes of a link's manager: its manage token or the admin key. */
export const MANAGER_SECURITY: Array<Record<string, string[]>> = [{ manageToken: [] }, { adminKey: [] }];

export const CodeParams = Type.Object({ code: Type.String({ description: 'The short code (letters, digits, - and _)' }) });

/** The refusals of a route for a link's manager (its manage token, its key, a manager key or the admin key). */
export const LINK_MANAGER_ERRORS = {
  401: described(ErrorEnvelope, 'No credentials (WWW-Authenticate: Bearer)', {
    status: 401,
    response: 'Unauthorized',
    message: CREDENTIALS_REQUIRED,
  }),
  403: described(ErrorEnvelope, 'The credentials do not manage this link', {
    status: 403,
    response: 'Forbidden',
    message: forbidden().message,
  }),
  404: described(ErrorEnvelope, 'No link has this code', { status: 404, response: 'Not Found', message: 'Link not found' }),
};

/** A create (one or in bulk) whose Authorization is not an API key: anonymous creates send none. */
export const CREATE_KEY_REFUSED = described(ErrorEnvelope, 'Authorization was sent but is not a live API key (nor the admin key)', {
  status: 401,
  response: 'Unauthorized',
  message: 'Authorization on a create must be Bearer <API key>, or be left out',
});
