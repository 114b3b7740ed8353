import { Type } from '@sinclair/typebox';
import type { ApiDocument } from '../../kit/http/openapi.js';

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
