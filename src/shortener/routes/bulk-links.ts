import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Ipv6Prefixes } from '../../kit/http/client-ip.js';
import type { App } from '../../kit/http/app.js';
import { badRequest, HttpError } from '../../kit/http/errors.js';
import { described } from '../../kit/http/openapi.js';
import { bodyValidator } from '../../kit/http/validation.js';
import type { FixedWindowLimiter, RateLimitDecision } from '../../kit/rate-limit.js';
import { dataEnvelope, envelope, ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import type { Access, Principal } from '../access.js';
import type { LinkLimits, LinkService } from '../links.js';
import {
  addressLimitMessage,
  CreatedData,
  CreateLinkBody,
  createdData,
  createFields,
  creator,
  quotaKey,
  quotaMessage,
  rateLimitHeaders,
  refuseCreate,
} from './create-link.js';
import { CREATE_KEY_REFUSED } from './schemas.js';

/** The most links one bulk create takes. */
export const MAX_BULK_ITEMS = 1000;
/**
 * 1,000 items, each up to a 2,048-character URL with a title, tags, an alias and limits, are
 * about 2.5 MB of JSON: 4 MiB holds them with room for escapes, and bounds what one request may
 * make the service parse.
 */
export const BULK_BODY_LIMIT = 4 * 1024 * 1024;

const ItemResult = Type.Object({
  status: Type.Integer({ description: '201, or the status the single create would have answered' }),
  response: Type.String(),
  message: Type.String(),
  data: Type.Optional(CreatedData),
});

/** What the hooks decided for a request, for its handler. */
interface Admission {
  principal: Principal | undefined;
  /** How many items, from the first, are within the limit (the others get a 429 each). */
  admitted: number;
  /** The last counting's decision, for the 429 items' wait. */
  decision: RateLimitDecision;
}

export const BULK_PASSWORD = 'body/password is not taken by the bulk create: create the link alone, or set it with PATCH /api/links/:code';

export async function bulkLinksRoute(
  app: App,
  {
    links,
    limiter,
    keyQuota,
    baseUrl,
    ipv6,
    access,
  }: { links: LinkService; limiter: FixedWindowLimiter; keyQuota: FixedWindowLimiter; baseUrl: string; ipv6: Ipv6Prefixes; access: Access },
): Promise<void> {
  const validateItem = bodyValidator(CreateLinkBody);
  const admissions = new WeakMap<FastifyRequest, Admission>();

  // Counts `amount` creates: against the client address without credentials (the contract's
  // limit), against the key's hourly quota with them.
  const count = (request: FastifyRequest, principal: Principal | undefined, amount: number) =>
    principal === undefined
      ? limiter.consumeAddressUnits('', request.ip, ipv6, amount)
      : keyQuota.consumeUnits(quotaKey(principal), amount);

  const tooMany = (principal: Principal | undefined, seconds: number) =>
    principal === undefined ? addressLimitMessage(seconds) : quotaMessage(keyQuota.max, seconds);

  app.post(
    '/api/links/bulk',
    {
      bodyLimit: BULK_BODY_LIMIT,
      schema: {
        tags: ['links'],
        summary: `Create up to ${MAX_BULK_ITEMS} short links at once, each answered on its own`,
        description:
          'The body is a JSON array of 1 to 1000 bodies of the single create. The answer is a 200 whose data.results holds, in the order of the items, ' +
          'what the single create would have answered for each: {status: 201, …, data: the link with its manage_token} or its error {status, response, message}. ' +
          "A refused item does not keep the others from being created. Without Authorization every item counts against the client address's 10 creates a minute " +
          "(items beyond it get a 429 each; none left: the whole request is a 429); with an API key or the admin key, against that key's KEY_CREATE_PER_HOUR.",
        body: Type.Array(Type.Unknown(), { minItems: 1, maxItems: MAX_BULK_ITEMS }),
        response: {
          200: envelope(
            Type.Object({
              created: Type.Integer(),
              refused: Type.Integer(),
              results: Type.Array(ItemResult),
            }),
          ),
          400: described(ErrorEnvelope, 'The body is not an array of 1 to 1000 items: nothing is created', {
            status: 400,
            response: 'Bad Request',
            message: 'body must NOT have more than 1000 items',
          }),
          401: CREATE_KEY_REFUSED,
          429: described(
            ErrorEnvelope,
            'No create left this window for this client, or this hour for this key: nothing is created (Retry-After)',
            {
              status: 429,
              response: 'Too Many Requests',
              message: 'Too many requests, please try again in 42 seconds.',
            },
          ),
        },
      },
      // Before the body is read: the credentials, and one create counted for the request itself,
      // so that a client with nothing left is refused without its body being parsed, and a
      // malformed request counts as one create, as it does on the single create.
      onRequest: async (request, reply) => {
        const principal = await creator(access, request);
        const decision = await count(request, principal, 1);
        void rateLimitHeaders(reply, decision);
        if (decision.admitted === 0) return refuseCreate(reply, decision.retryAfterSeconds, tooMany(principal, decision.retryAfterSeconds));
        admissions.set(request, { principal, admitted: 1, decision });
      },
      // The body is parsed, not yet validated: every further item counts, in one step.
      preValidation: async (request, reply) => {
        const admission = admissions.get(request)!;
        const body = request.body;
        if (!Array.isArray(body) || body.length < 2 || body.length > MAX_BULK_ITEMS) return;
        const decision = await count(request, admission.principal, body.length - 1);
        void rateLimitHeaders(reply, decision);
        admission.admitted += decision.admitted;
        admission.decision = decision;
      },
    },
    async (request, reply) => {
      const { principal, admitted, decision } = admissions.get(request)!;
      const ownerKeyId = principal?.kind === 'key' ? principal.key.id : undefined;
      const items = request.body;
      const results: Array<typeof ItemResult.static> = new Array(items.length);
      const creates: Array<{ index: number; url: string; limits: LinkLimits }> = [];
      items.forEach((item, index) => {
        if (index >= admitted) {
          results[index] = statusEnvelope(429, tooMany(principal, decision.retryAfterSeconds));
          return;
        }
        const refusal = validateItem(item);
        if (refusal !== undefined) {
          results[index] = statusEnvelope(400, refusal);
          return;
        }
        const body = item as typeof CreateLinkBody.static;
        try {
          // A thousand bcrypt hashes would hold the hashing workers for a minute: one link at a time.
          if (body.password !== undefined) throw badRequest(BULK_PASSWORD);
          creates.push({ index, url: body.url, limits: createFields(body, baseUrl, ownerKeyId, principal === undefined) });
        } catch (err) {
          if (!(err instanceof HttpError)) throw err;
          results[index] = statusEnvelope(err.statusCode, err.message);
        }
      });
      const outcomes = await links.createMany(creates);
      let created = 0;
      outcomes.forEach((outcome, i) => {
        const { index } = creates[i]!;
        if (outcome instanceof HttpError) {
          results[index] = statusEnvelope(outcome.statusCode, outcome.message);
          return;
        }
        created++;
        results[index] = dataEnvelope(201, 'Short link created successfully', createdData(outcome.link, outcome.manageToken, baseUrl));
      });
      void rateLimitHeaders(reply, decision);
      return reply.code(200).send(
        dataEnvelope(200, `Bulk create done: ${created} created, ${items.length - created} refused`, {
          created,
          refused: items.length - created,
          results,
        }),
      );
    },
  );
}
