import { Type } from '@sinclair/typebox';
import { rateLimitKey } from '../../kit/client-ip.js';
import type { App } from '../../kit/http.js';
import type { FixedWindowLimiter } from '../../kit/rate-limit.js';
import { MAX_URL_LENGTH, type LinkService } from '../links.js';
import { ErrorEnvelope, envelope } from './schemas.js';

const CreateLinkBody = Type.Object(
  { url: Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH }) },
  { additionalProperties: false },
);

export function createLinkRoute(
  app: App,
  links: LinkService,
  limiter: FixedWindowLimiter,
  baseUrl: string,
  ipv6Prefix: number,
): void {
  app.post(
    '/api/links',
    {
      schema: {
        summary: 'Create a short link (10 per minute per client IP)',
        body: CreateLinkBody,
        response: {
          201: envelope(Type.Object({ code: Type.String(), short_url: Type.String(), original_url: Type.String() })),
          400: ErrorEnvelope,
          429: ErrorEnvelope,
        },
      },
      // Before body validation: every request counts, malformed ones included.
      // One window per client, however its address is spelled, and per IPv6 /64.
      onRequest: async (request, reply) => {
        const decision = await limiter.consume(rateLimitKey(request.ip, ipv6Prefix));
        void reply.header('x-ratelimit-limit', String(decision.limit));
        void reply.header('x-ratelimit-remaining', String(decision.remaining));
        if (decision.limited) {
          const seconds = decision.retryAfterSeconds;
          return reply
            .code(429)
            .header('retry-after', String(seconds))
            .send({
              status: 429,
              response: 'Too Many Requests',
              message: `Too many requests, please try again in ${seconds} second${seconds === 1 ? '' : 's'}.`,
            });
        }
      },
    },
    async (request, reply) => {
      const link = await links.create(request.body.url);
      return reply.code(201).send({
        status: 201,
        response: 'Created',
        message: 'Short link created successfully',
        data: { code: link.code, short_url: `${baseUrl}/${link.code}`, original_url: link.original_url },
      });
    },
  );
}
