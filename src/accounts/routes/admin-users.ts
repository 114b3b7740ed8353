import { paginationLinks } from '../../kit/http/pagination.js';
import { Type } from '@sinclair/typebox';
import type { App } from '../../kit/http/app.js';
import { type AccessCheck, requireAccessToken } from '../auth.js';
import type { AccountsService } from '../service.js';
import { badRequest } from '../../kit/http/errors.js';
import { BEARER_SECURITY, BearerHeader, Errors, PublicUser } from './schemas.js';

export const PER_PAGE = { default: 50, max: 1000 } as const;
/** Keeps OFFSET far inside what PostgreSQL and JS numbers hold. */
export const MAX_PAGE = 1_000_000;

export const ListQuery = Type.Object(
  {
    page: Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 1, description: 'Page number, from 1' }),
    per_page: Type.Integer({ minimum: 1, maximum: PER_PAGE.max, default: PER_PAGE.default, description: 'Accounts per page' }),
  },
  { additionalProperties: false },
);

export const SEARCH_MAX_LENGTH = 200;
// C0 controls, DEL and C1 controls: nothing an email or a name holds.
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

const UsersQuery = Type.Object(
  {
    ...ListQuery.properties,
    q: Type.Optional(
      Type.String({
        description: `Only accounts whose email or name contains this text, in any case; 1 to ${SEARCH_MAX_LENGTH} characters after trimming, no control characters. \`%\`, \`_\` and \`\\\` match themselves.`,
        examples: ['example.com'],
      }),
    ),
  },
  { additionalProperties: false },
);

/** The trimmed search text, or a 400 in the envelope when it breaks its rule. */
export function searchText(q: string | undefined): string | undefined {
  if (q === undefined) return undefined;
  const text = q.trim();
  if (text.length < 1 || text.length > SEARCH_MAX_LENGTH || CONTROL_CHARACTER.test(text)) {
    throw badRequest(`querystring/q must be 1 to ${SEARCH_MAX_LENGTH} characters after trimming, without control characters`);
  }
  return text;
}

export async function adminUsersRoute(app: App, { accounts, access }: { accounts: AccountsService; access: AccessCheck }): Promise<void> {
  // A valid token, then role admin (docs/accounts.md, rule 6).
  requireAccessToken(app, { ...access, role: 'admin' });
  app.get(
    '/admin/users',
    {
      schema: {
        tags: ['admin'],
        security: BEARER_SECURITY,
        summary: 'Every account, or those matching q, oldest first (role admin only)',
        description: `${BearerHeader.description} The body is a bare array; the total is in X-Total-Count and the other pages in Link.`,
        querystring: UsersQuery,
        response: {
          200: Type.Array(PublicUser, { description: 'One page of accounts (X-Total-Count, Link)' }),
          400: Errors.invalid(`querystring/q must be 1 to ${SEARCH_MAX_LENGTH} characters after trimming, without control characters`),
          401: Errors.noToken,
          403: Errors.forbidden,
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request, reply) => {
      const q = searchText(request.query.q);
      const result = await accounts.listUsers(request.query.page, request.query.per_page, q);
      void reply.header('x-total-count', String(result.total)).header('link', paginationLinks('/admin/users', result, { q }));
      return result.users;
    },
  );
}
