import { STATUS_CODES } from 'node:http';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifySchema } from 'fastify';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** A service's additions to its OpenAPI document: the tags its routes use and how callers authenticate. */
export interface ApiDocument {
  tags: Array<{ name: string; description: string }>;
  securitySchemes?: Record<string, SecurityScheme>;
}

/** The two ways callers of this project's services authenticate. */
export type SecurityScheme =
  | { type: 'http'; scheme: 'bearer'; bearerFormat?: string; description: string }
  | { type: 'apiKey'; in: 'header'; name: string; description: string };

/** The envelope a service sends its errors in (the kit's ErrorBody). */
type ErrorBody = (status: number, message: string) => Record<string, unknown>;

/** What a status means on this project's routes, for the responses a route leaves undescribed. */
const MEANING: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  204: 'No content',
  206: 'Partial content: a page of a larger result (Content-Range says which)',
  302: 'Found: redirected to the Location header',
  400: 'Invalid request: a parameter or body field breaks its rule, or the body is not valid JSON',
  401: 'Credentials missing or not valid',
  403: 'Authenticated, but not allowed to do this',
  404: 'Not found',
  406: 'The Accept header asks for a representation that cannot be given',
  409: 'Conflict with the current state',
  410: 'Gone: no longer served',
  413: 'Request body larger than the limit',
  415: 'Unsupported media type: the body must be application/json',
  422: 'Well-formed but refused',
  429: 'Too many requests: Retry-After says when to try again',
  500: 'Internal error (never carries details)',
  503: 'Temporarily unavailable: Retry-After says when to try again',
};

/** The message an example error body shows. */
const EXAMPLE_MESSAGE: Record<number, string> = {
  400: 'body/url must NOT have fewer than 1 characters',
  401: 'Authentication required',
  403: 'Forbidden',
  404: 'Not found',
  409: 'Conflict',
  410: 'Gone',
  413: 'Request body is too large',
  415: 'Unsupported Media Type: text/plain',
  429: 'Too many requests, please try again in 42 seconds.',
  500: 'Internal Server Error',
  503: 'Service temporarily unavailable, try again shortly',
};

/**
 * The key of a route schema holding parts (body, querystring, headers) that the
 * document shows but Fastify does not validate, because the handler reads them
 * itself (the idp's REST routes parse the raw query string and any JSON body).
 */
export const DOCUMENT_ONLY = 'x-document-only';

/** A response schema with the description its status has on this route (documentation only). */
export function described<T extends object>(schema: T, description: string, example?: unknown): T {
  return { ...schema, description, ...(example !== undefined && { examples: [example] }) };
}

/** The JSON schema of a service's error envelope, read off the envelope itself. */
function errorBodySchema(errorBody: ErrorBody): Record<string, unknown> {
  const sample = errorBody(500, 'Internal Server Error');
  const properties = Object.fromEntries(
    Object.entries(sample).map(([key, value]) => [key, { type: Number.isInteger(value) ? 'integer' : typeof value }]),
  );
  return { type: 'object', properties, required: Object.keys(sample) };
}

/**
 * The swagger transform of every route: each response gets a description and
 * each error response an example in the service's envelope, unless the route
 * gave its own. The statuses every route shares are documented here, so a
 * route lists only its own: any route may answer 500 (an unexpected failure)
 * and 503 (a dependency away, the connection cap), and a route that takes a
 * body also 413 (too large) and 415 (not JSON), all in the envelope. Copies
 * only: the schemas Fastify validates and serialises with are left as they are.
 */
export function documentResponses(errorBody: ErrorBody) {
  const errorSchema = errorBodySchema(errorBody);
  return ({ schema, url }: { schema: FastifySchema; url: string }) => {
    // A plugin's '/' route is registered for both `/prefix` and `/prefix/`; the document names the first.
    if (url.length > 1 && url.endsWith('/')) url = url.slice(0, -1);
    // A route without any schema is a web page or a static file, not part of the API.
    if (schema === undefined || schema === null) return { schema: { hide: true } as FastifySchema, url };
    const { [DOCUMENT_ONLY]: documentOnly, ...validated } = (schema ?? {}) as Record<string, unknown>;
    if (documentOnly) schema = { ...validated, ...(documentOnly as object) };
    const responses = schema?.response as Record<string, Record<string, unknown>> | undefined;
    if (!responses || (schema as { hide?: boolean }).hide) return { schema, url };
    const response: Record<string, unknown> = {};
    const shared = { 500: errorSchema, 503: errorSchema, ...(schema.body !== undefined && { 413: errorSchema, 415: errorSchema }) };
    for (const [status, given] of Object.entries({ ...shared, ...responses })) {
      const code = Number(status);
      const description = (given.description as string | undefined) ?? MEANING[code] ?? STATUS_CODES[code] ?? status;
      const examples =
        given.examples ?? (code >= 400 ? [errorBody(code, EXAMPLE_MESSAGE[code] ?? STATUS_CODES[code] ?? 'Error')] : undefined);
      response[status] = { ...given, description, ...(examples !== undefined && { examples }) };
    }
    return { schema: { ...schema, response }, url };
  };
}

interface OpenApiDocument {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema?: object }> }> }>>;
}

/**
 * The onSend check behind OPENAPI_RESPONSE_CHECK (the test suite turns it on; it is off by
 * default): each answer of a documented route against the document the service serves. An
 * answer whose status the route's document does not list, or whose JSON body its schema refuses,
 * is replaced by a 500 naming the mismatch, and logged as an error, so that the test which
 * caused it fails on the spot.
 */
export function checkResponsesAgainstDocument(app: FastifyInstance, errorBody: ErrorBody): void {
  const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
  const compiled = new WeakMap<object, ValidateFunction>();
  let document: OpenApiDocument | undefined;
  const mismatch = (request: FastifyRequest, reply: FastifyReply, what: string) => {
    request.log.error({ mismatch: what }, 'response does not match the API document');
    void reply.code(500).header('content-type', 'application/json; charset=utf-8');
    return JSON.stringify(errorBody(500, `Response does not match the API document: ${what}`));
  };
  app.addHook('onSend', async (request, reply, payload) => {
    const route = request.routeOptions.url;
    if (route === undefined || request.method === 'HEAD') return payload;
    document ??= (app as unknown as { swagger(): OpenApiDocument }).swagger();
    let path = route.replace(/:(\w+)/g, '{$1}');
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
    const operation = document.paths[path]?.[request.method.toLowerCase()];
    // Hidden routes (metrics, the documentation itself, pages) are not part of the document.
    if (!operation) return payload;
    const where = `${request.method} ${path} ${reply.statusCode}`;
    const documented = operation.responses[String(reply.statusCode)];
    if (!documented) return mismatch(request, reply, `${where}: status not in the document`);
    const schema = documented.content?.['application/json']?.schema;
    const type = String(reply.getHeader('content-type') ?? '');
    if (!schema || typeof payload !== 'string' || !type.includes('json') || payload === '') return payload;
    let validate = compiled.get(schema);
    if (!validate) {
      validate = ajv.compile(schema);
      compiled.set(schema, validate);
    }
    if (!validate(JSON.parse(payload))) return mismatch(request, reply, `${where}: ${ajv.errorsText(validate.errors)}`);
    return payload;
  });
}
