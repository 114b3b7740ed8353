import crypto from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HttpError } from '../kit/http/errors.js';

const digest = (value: string) => crypto.createHash('sha256').update(value).digest();

/**
 * Whether the Authorization header carries exactly `Bearer <key>`. The key is
 * compared through SHA-256 digests, which have the same length whatever was
 * sent (timingSafeEqual needs equal lengths), so the time taken tells nothing
 * about how much of a guess was right.
 */
export function adminKeyMatches(header: string | undefined, key: string): boolean {
  const given = /^Bearer (.+)$/i.exec(header ?? '')?.[1] ?? '';
  return crypto.timingSafeEqual(digest(given), digest(key)) && given.length > 0;
}

export const ADMIN_NOT_CONFIGURED = 'Admin API is not configured: set SHORTENER_ADMIN_KEY';

/**
 * The onRequest hook of every admin route: it runs before the body is read and
 * before the query or body is validated, so a caller without the key learns
 * nothing from validation messages. Without a configured key the admin API is
 * off (503), never open.
 */
export function requireAdminKey(key: string | undefined) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    if (key === undefined) throw new HttpError(503, ADMIN_NOT_CONFIGURED);
    if (!adminKeyMatches(request.headers.authorization, key)) {
      throw new HttpError(401, 'A valid admin key is required: Authorization: Bearer <SHORTENER_ADMIN_KEY>', {
        'www-authenticate': 'Bearer',
      });
    }
  };
}
