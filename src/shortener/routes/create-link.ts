import { Type } from '@sinclair/typebox';
import { rateLimitKey } from '../../kit/client-ip.js';
import type { App } from '../../kit/http.js';
import { described } from '../../kit/openapi.js';
import type { FixedWindowLimiter } from '../../kit/rate-limit.js';
import { badRequest } from '../../kit/errors.js';
import { MAX_URL_LENGTH, MAX_VISITS_LIMIT, type LinkService } from '../links.js';
import { parseIsoTimestamp } from '../timestamps.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/status-envelope.js';

const CreateLinkBody = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH }),
    expires_at: Type.Optional(Type.String({ maxLength: 64, description: 'ISO 8601 timestamp with an offset, in the future' })),
    max_visits: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_VISITS_LIMIT, description: 'counted redirects allowed; then 410' })),
  },
  { additionalProperties: false },
);

/** expires_at as an instant: ISO 8601 with an explicit offset, so no one's local time is guessed. */
function parseExpiresAt(text: string | undefined): Date | undefined {
  if (text === undefined) return undefined;
  const ms = parseIsoTimestamp(text, { dateOnly: false });
  if (ms === undefined) throw badRequest('expires_at must be an ISO 8601 timestamp with an offset, e.g. 2026-12-31T23:59:59Z');
  return new Date(ms);
}

export async function createLinkRoute(
  app: App,
  { links, limiter, baseUrl, ipv6Prefix }: { links: LinkService; limiter: FixedWindowLimiter; baseUrl: string; ipv6Prefix: number },
): Promise<void> {
  app.post(
    '/api/links',
    {
      schema: {
        tags: ['links'],
        summary: 'Create a short link (10 per minute per client IP)',
        body: CreateLinkBody,
        response: {
          201: envelope(
            Type.Object({
              code: Type.String(),
              short_url: Type.String(),
              original_url: Type.String(),
              // Echoed only when given.
              expires_at: Type.Optional(Type.String({ format: 'date-time' })),
              max_visits: Type.Optional(Type.Integer()),
            }),
          ),
          400: described(ErrorEnvelope, 'The URL or another field breaks its rule, or the body is not valid JSON', {
            status: 400,
            response: 'Bad Request',
            message: 'body/url must NOT have fewer than 1 characters',
          }),
          413: ErrorEnvelope,
          415: ErrorEnvelope,
          429: described(ErrorEnvelope, 'More than 10 creations this minute from this client (Retry-After, X-RateLimit-*)', {
            status: 429,
            response: 'Too Many Requests',
            message: 'Too many requests, please try again in 42 seconds.',
          }),
          503: ErrorEnvelope,
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
            .send(statusEnvelope(429, `Too many requests, please try again in ${seconds} second${seconds === 1 ? '' : 's'}.`));
        }
      },
    },
    async (request, reply) => {
      const { url, max_visits: maxVisits } = request.body;
      const link = await links.create(url, { expiresAt: parseExpiresAt(request.body.expires_at), maxVisits });
      return reply.code(201).send(dataEnvelope(201, 'Short link created successfully', {
          code: link.code,
          short_url: `${baseUrl}/${link.code}`,
          original_url: link.original_url,
          ...(link.expires_at !== null && { expires_at: link.expires_at.toISOString() }),
          ...(link.max_visits !== null && { max_visits: link.max_visits }),
        }));
    },
  );
}
