import { Type } from '@sinclair/typebox';
import { badRequest } from '../../kit/errors.js';
import type { App } from '../../kit/http.js';
import type { AccountsService, UserPage } from '../service.js';
import { BEARER_SECURITY, BearerHeader, Errors, PublicUser } from './schemas.js';

export const PER_PAGE = { default: 50, max: 1000 } as const;
/** Keeps OFFSET far inside what PostgreSQL and JS numbers hold. */
export const MAX_PAGE = 1_000_000;

const ListQuery = Type.Object(
  {
    page: Type.Integer({ minimum: 1, maximum: MAX_PAGE, default: 1, description: 'Page number, from 1' }),
    per_page: Type.Integer({ minimum: 1, maximum: PER_PAGE.max, default: PER_PAGE.default, description: 'Accounts per page' }),
  },
  { additionalProperties: false },
);

/** RFC 8288 links to the other pages, relative to this route. */
function linkHeader({ page, perPage, lastPage }: UserPage): string {
  const link = (n: number, rel: string) => `</admin/users?page=${n}&per_page=${perPage}>; rel="${rel}"`;
  const links = [link(1, 'first')];
  if (page > 1) links.push(link(Math.min(page - 1, lastPage), 'prev'));
  if (page < lastPage) links.push(link(page + 1, 'next'));
  links.push(link(lastPage, 'last'));
  return links.join(', ');
}

export function adminUsersRoute(app: App, accounts: AccountsService): void {
  app.get(
    '/admin/users',
    {
      schema: {
        tags: ['admin'],
        security: BEARER_SECURITY,
        summary: 'Every account, oldest first (role admin only)',
        description: `${BearerHeader.description} The body is a bare array; the total is in X-Total-Count and the other pages in Link.`,
        querystring: ListQuery,
        response: {
          200: Type.Array(PublicUser, { description: 'One page of accounts (X-Total-Count, Link)' }),
          400: Errors.invalid('querystring/page must be >= 1'),
          401: Errors.noToken,
          403: Errors.forbidden,
          503: Errors.unavailable('The database is unavailable (Retry-After)'),
        },
      },
    },
    async (request, reply) => {
      // Ajv coerces "1e400" to Infinity and then skips minimum/maximum for a non-finite number, so
      // the bounds above let it through (OFFSET Infinity was a 500). Until the kit's validator
      // refuses non-finite numbers itself, they are refused here with the same kind of 400.
      for (const [name, value, max] of [['page', request.query.page, MAX_PAGE], ['per_page', request.query.per_page, PER_PAGE.max]] as const) {
        if (!Number.isFinite(value)) throw badRequest(`querystring/${name} must be an integer from 1 to ${max}`);
      }
      const result = await accounts.listUsers(request.query.page, request.query.per_page);
      void reply.header('x-total-count', String(result.total)).header('link', linkHeader(result));
      return result.users;
    },
  );
}
