import { parse as parseQuery } from 'node:querystring';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../../kit/db.js';
import { badRequest, forbidden, notFound, serviceUnavailable } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import { described } from '../../kit/http/openapi.js';
import { gone, isWellFormedCode, linkState, type LinkService } from '../links.js';
import type { LinkPasswords } from '../link-passwords.js';
import type { Refusal } from '../repository.js';
import { CodeParams } from './schemas.js';
import { referrerHost } from '../visits.js';
import { ErrorEnvelope, statusEnvelope } from '../../kit/http/status-envelope.js';
import { wantsPage } from '../../web/serve.js';
import { sendDeadLinkPage, sendUnlockPage, type UnlockProblem } from './web-pages.js';

/** A password form is one short field: anything larger is not one. */
const UNLOCK_BODY_LIMIT = 4096;
/** Longer than any password a link can have (72 bytes), short enough that bcrypt's work stays fixed. */
const MAX_GUESS_LENGTH = 1024;
const PASSWORD_FIELD = 'body/password must be a non-empty string (a form field or a JSON property)';
/** A referrer host the password form may carry: what referrerHost() makes of an http(s) Referer, and nothing else. */
const FORM_HOST = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$/;

/** The machine-readable reason of a protected link's refusal, beside the envelope's words. */
export const PASSWORD_ERRORS = {
  required: 'password_required',
  wrong: 'password_incorrect',
  limited: 'password_attempts_exceeded',
} as const;

const PasswordError = Type.Object({
  status: Type.Integer(),
  response: Type.String(),
  message: Type.String(),
  // Absent on the one 403 that is not about the password: a form from another site.
  error: Type.Optional(Type.Union(Object.values(PASSWORD_ERRORS).map((code) => Type.Literal(code)))),
});

const PASSWORD_MESSAGES = {
  required: 'This link is protected by a password: POST it to this URL as the field "password" (a form or JSON)',
  wrong: 'The password is not right',
} as const;

const REDIRECT_ERRORS = {
  404: described(
    ErrorEnvelope,
    'No link has this code (Cache-Control: no-store). A browser (Accept naming text/html, not JSON) gets a page saying so instead',
    { status: 404, response: 'Not Found', message: 'Link not found' },
  ),
  410: described(
    ErrorEnvelope,
    'The link expired, reached max_visits or was disabled (Cache-Control: no-store, since it may come back). A browser gets a page saying which instead',
    { status: 410, response: 'Gone', message: 'This link expired at 2027-01-31T23:59:59.000Z' },
  ),
};

/**
 * The catch-all `/:code`: registered last among the routes (rule 7). GET and HEAD redirect;
 * POST gives a protected link's password, and a right one redirects like GET.
 */
export async function redirectRoute(
  app: App,
  { links, passwords, baseUrl }: { links: LinkService; passwords: LinkPasswords; baseUrl: string },
): Promise<void> {
  // Only these routes (the plugin's own scope) read an HTML form's body.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: UNLOCK_BODY_LIMIT },
    (_request, body, done) => done(null, parseQuery(body as string)),
  );
  const ownOrigin = new URL(baseUrl).origin;

  /** A link that leads nowhere: a page for a browser, the envelope for an API client; never cached, since a link can come back. */
  const dead = (
    request: FastifyRequest,
    reply: FastifyReply,
    reason: 'unknown' | Refusal,
    limits?: { expires_at: Date | null; max_visits: number | null },
  ) => {
    if (wantsPage(request)) return sendDeadLinkPage(reply, reason, limits);
    reply.header('cache-control', 'no-store');
    throw reason === 'unknown' ? notFound('Link not found') : gone(reason, limits!);
  };

  /** A protected link's answer short of the redirect: the password page for a browser, JSON with its reason otherwise. */
  const locked = (request: FastifyRequest, reply: FastifyReply, code: string, problem: UnlockProblem) => {
    if (wantsPage(request)) return sendUnlockPage(reply, code, problem, cameFrom(request));
    void reply.header('cache-control', 'no-store');
    if (problem.kind === 'limited') {
      const seconds = problem.retryAfterSeconds;
      return reply
        .code(429)
        .header('retry-after', String(seconds))
        .send({
          ...statusEnvelope(429, `Too many password attempts, please try again in ${seconds} second${seconds === 1 ? '' : 's'}.`),
          error: PASSWORD_ERRORS.limited,
        });
    }
    return reply.code(403).send({ ...statusEnvelope(403, PASSWORD_MESSAGES[problem.kind]), error: PASSWORD_ERRORS[problem.kind] });
  };

  /**
   * Where the visitor came from, as the visit records it: the host of the Referer, or what the
   * password form carried of the first request (its own Referer is the password page). '' for none.
   */
  const cameFrom = (request: FastifyRequest): string => {
    const carried = (request.body as { from?: unknown } | undefined)?.from;
    if (request.method === 'POST' && typeof carried === 'string') return FORM_HOST.test(carried) ? carried : '';
    const host = referrerHost(request.headers.referer);
    return FORM_HOST.test(host) ? host : '';
  };

  /** Counts the click with its visit (durable before it answers) and redirects; `unlocked`: its password was just verified. */
  const follow = async (request: FastifyRequest, reply: FastifyReply, code: string, unlocked: boolean) => {
    let outcome: Awaited<ReturnType<typeof links.follow>>;
    // The password form's own request names the password page as its Referer: the visit takes the host the form carried.
    const carried = (request.body as { from?: unknown } | undefined)?.from;
    const referer =
      unlocked && typeof carried === 'string'
        ? carried && FORM_HOST.test(carried)
          ? `https://${carried}/`
          : undefined
        : request.headers.referer;
    try {
      outcome = await links.follow(code, { ip: request.ip, userAgent: request.headers['user-agent'], referer }, unlocked);
    } catch (err) {
      // The batch's statement failed as a whole: neither this click nor its
      // visit was written, so the visitor may simply try again. An
      // unreachable database takes the central handler's usual path.
      if (isDatabaseUnavailable(err)) throw err;
      request.log.error({ err: { message: (err as Error).message, code: (err as { code?: string }).code } }, 'click batch failed');
      throw serviceUnavailable();
    }
    if (outcome === undefined) return dead(request, reply, 'unknown');
    if (!outcome.counted) {
      if (outcome.refusal === 'password') return locked(request, reply, code, { kind: 'required' });
      return dead(request, reply, outcome.refusal, outcome);
    }
    return redirect(reply, outcome.url);
  };

  // 302, not 301, and no-store: every visit must reach the service to be counted (rule 5).
  // URL.href is the header-safe (ASCII) form of the stored URL.
  const redirect = (reply: FastifyReply, target: string) => reply.header('cache-control', 'no-store').redirect(new URL(target).href, 302);

  app.get(
    '/:code',
    {
      schema: {
        tags: ['redirect'],
        summary:
          'Redirect to the original URL and count the click with its visit (HEAD does not count); 410 once the link expired, reached max_visits or was disabled; 403 for a link with a password',
        params: CodeParams,
        response: {
          // reply.redirect sends no body, so this schema never serialises anything: it documents the answer.
          302: {
            type: 'null',
            description: 'Redirect to the original URL; the click is counted (Cache-Control: no-store, so every visit comes back)',
            headers: { Location: { type: 'string', format: 'uri', description: 'The original URL' } },
          },
          403: described(
            PasswordError,
            'The link has a password: nothing is counted and the destination is not told. A browser gets a page with a password form instead',
            { status: 403, response: 'Forbidden', message: PASSWORD_MESSAGES.required, error: PASSWORD_ERRORS.required },
          ),
          ...REDIRECT_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const { code } = request.params;
      // Before anything else: a malformed code never reaches the database (rule 4).
      if (!isWellFormedCode(code)) return dead(request, reply, 'unknown');
      if (request.method !== 'HEAD') return follow(request, reply, code, false);
      // HEAD is a look, not a visit (link checkers, previews): answer alike, count nothing.
      const link = await links.find(code);
      if (!link) return dead(request, reply, 'unknown');
      const state = linkState(link, links.now());
      if (state !== 'active') return dead(request, reply, state, link);
      if (link.password_hash !== null) return locked(request, reply, code, { kind: 'required' });
      return redirect(reply, links.destination(link, request.headers['user-agent']));
    },
  );

  app.post(
    '/:code',
    {
      bodyLimit: UNLOCK_BODY_LIMIT,
      // Before the body is read: the form is only ever sent by the service's own page. A browser
      // says where a form comes from (Sec-Fetch-Site, Origin); a request from another site is
      // refused, so no other site can make its visitors' browsers count clicks here.
      onRequest: async (request) => {
        const site = request.headers['sec-fetch-site'];
        const origin = request.headers.origin;
        const crossSite =
          (site !== undefined && site !== 'same-origin' && site !== 'none') ||
          (origin !== undefined && origin !== ownOrigin && origin !== `${request.protocol}://${request.host}`);
        if (crossSite) throw forbidden('A link password is only taken from a page of this service');
      },
      schema: {
        tags: ['redirect'],
        summary: "Give a protected link's password: a right one counts the click and redirects like GET",
        description:
          'The body is a form (application/x-www-form-urlencoded) or JSON with `password` (a string). A code that is not a link with a password is a 404, as POST on a code always was. Guesses are limited per link and client address (429 with Retry-After), counted before the password is checked.',
        params: CodeParams,
        response: {
          302: {
            type: 'null',
            description: 'The right password: redirect to the original URL; the click is counted now',
            headers: { Location: { type: 'string', format: 'uri', description: 'The original URL' } },
          },
          303: {
            type: 'null',
            description: 'A browser posting to a link without a password (removed since its form was shown): see the link itself',
            headers: { Location: { type: 'string', description: 'The short link' } },
          },
          400: described(ErrorEnvelope, 'No password in the body', { status: 400, response: 'Bad Request', message: PASSWORD_FIELD }),
          403: described(PasswordError, 'A wrong password (a browser gets the form again, saying so), or a form from another site', {
            status: 403,
            response: 'Forbidden',
            message: PASSWORD_MESSAGES.wrong,
            error: PASSWORD_ERRORS.wrong,
          }),
          429: described(
            PasswordError,
            'Too many guesses at this link from this client, or at this link, or from this client (Retry-After)',
            {
              status: 429,
              response: 'Too Many Requests',
              message: 'Too many password attempts, please try again in 600 seconds.',
              error: PASSWORD_ERRORS.limited,
            },
          ),
          ...REDIRECT_ERRORS,
        },
      },
    },
    async (request, reply) => {
      const { code } = request.params;
      if (!isWellFormedCode(code)) return dead(request, reply, 'unknown');
      const link = await links.find(code);
      if (!link) return dead(request, reply, 'unknown');
      const state = linkState(link, links.now());
      if (state !== 'active') return dead(request, reply, state, link);
      // Nothing to unlock. A browser whose form outlived the password is sent to the link itself
      // (its GET counts the visit); for anyone else POST is no way to follow a link.
      if (link.password_hash === null) {
        if (wantsPage(request)) return reply.header('cache-control', 'no-store').redirect(code, 303);
        throw notFound('Link not found: no link with a password has this code');
      }
      // Read only now, so that POST on a code that is not a protected link answers as before (404), whatever its body.
      const password = (request.body as { password?: unknown } | undefined)?.password;
      if (typeof password !== 'string' || password.length === 0 || password.length > MAX_GUESS_LENGTH) throw badRequest(PASSWORD_FIELD);
      const guess = await passwords.guess(code, request.ip, password, link.password_hash);
      if (guess.result === 'limited') return locked(request, reply, code, { kind: 'limited', retryAfterSeconds: guess.retryAfterSeconds });
      if (guess.result === 'wrong') return locked(request, reply, code, { kind: 'wrong' });
      return follow(request, reply, code, true);
    },
  );
}
