import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { type ApiDocument, checkResponsesAgainstDocument, documentResponses } from './openapi.js';
import { docsContentSecurityPolicy } from './security-headers.js';
import type { ErrorBody } from './error-body.js';

export interface ApiDocsOptions {
  title: string;
  description?: string;
  version?: string;
  /** Tags and security schemes of the document. */
  document?: ApiDocument;
  errorBody: ErrorBody;
  /** Checks every answer of a documented route against the document (OPENAPI_RESPONSE_CHECK; tests). */
  responseCheck?: boolean;
}

/** The OpenAPI document at /docs/json, generated from the route schemas, and the Swagger UI at /docs. */
export async function serveApiDocs(app: FastifyInstance, opts: ApiDocsOptions): Promise<void> {
  await app.register(swagger, {
    openapi: {
      info: { title: opts.title, description: opts.description, version: opts.version ?? '1.0.0' },
      tags: [...(opts.document?.tags ?? []), { name: 'health', description: 'Liveness and readiness' }],
      ...(opts.document?.securitySchemes && { components: { securitySchemes: opts.document.securitySchemes } }),
    },
    transform: documentResponses(opts.errorBody),
  });
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true, transformStaticCSP: docsContentSecurityPolicy });
  if (opts.responseCheck) checkResponsesAgainstDocument(app, opts.errorBody);
}
