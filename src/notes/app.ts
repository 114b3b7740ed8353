import type { Writable } from 'node:stream';
import { type Clock, systemClock } from '../kit/clock.js';
import { HttpError } from '../kit/errors.js';
import { type App, buildHttpApp } from '../kit/http.js';
import { NOTES_DOCUMENT } from './schemas.js';
import { createMetricsRegistry } from '../kit/metrics.js';
import { httpSettings } from '../kit/http-limits.js';
import type { NotesConfig } from './config.js';
import { createIdentity } from './identity.js';
import { boundedFetch, createIdpClients, type IdpFetch, jwksUrl } from './idp-clients.js';
import { IdpUnavailableError, NoteStoreError } from './idp-errors.js';
import { measuredIdpFetch } from './idp-metrics.js';
import { createNotesStore } from './notes-store.js';
import { authRoutes, sessionRoutes } from './routes/auth.js';
import { notesRoutes } from './routes/notes.js';
import { webPagesRoutes } from './routes/web-pages.js';
import { createTokenVerifier } from './token-verifier.js';

export interface NotesDeps {
  /** Decides token expiry in IDP_VERIFY=local. */
  clock?: Clock;
  logStream?: Writable;
  /** Every request to the provider goes through this (tests count them); default: global fetch. */
  fetch?: IdpFetch;
}

// Readiness must answer quickly even when the provider hangs.
const READINESS_TIMEOUT_MS = 2000;

/** The notes app: identity and storage both live at the provider, reached only through supabase-js. */
export async function buildApp(config: NotesConfig, deps: NotesDeps = {}): Promise<App> {
  // Made before the server: every request to the provider is counted on its way out.
  const metrics = createMetricsRegistry();
  const idpFetch = measuredIdpFetch(metrics, deps.fetch);
  const clients = createIdpClients(config, idpFetch);
  const verifyToken = createTokenVerifier(config.IDP_VERIFY, {
    clients,
    idpUrl: config.IDP_URL,
    publishableKey: config.IDP_PUBLISHABLE_KEY,
    timeoutMs: config.IDP_TIMEOUT_MS,
    clock: deps.clock ?? systemClock,
    fetch: idpFetch,
  });
  const pingIdp = boundedFetch(Math.min(READINESS_TIMEOUT_MS, config.IDP_TIMEOUT_MS), idpFetch);

  const app = await buildHttpApp({
    title: 'notes',
    description:
      'Private notes. Identity is delegated to a Supabase-compatible provider; /notes routes need `Authorization: Bearer <access_token>` from /auth/login.',
    logLevel: config.LOG_LEVEL,
    logStream: deps.logStream,
    trustProxy: config.TRUST_PROXY,
    errorBody: (_status, message) => ({ message }),
    document: NOTES_DOCUMENT,
    readiness: async () => {
      const res = await pingIdp(jwksUrl(config.IDP_URL), { headers: { apikey: config.IDP_PUBLISHABLE_KEY } });
      // Read, not cancelled: the body is a few hundred bytes, and reading ends the request's timer.
      await res.arrayBuffer();
      if (!res.ok) throw new Error(`identity provider answered ${res.status}`);
    },
    notReadyMessage: 'Service not ready: identity provider unreachable',
    metrics: { token: config.METRICS_TOKEN, registry: metrics },
    http: httpSettings(config),
    responseCheck: config.OPENAPI_RESPONSE_CHECK,
  });

  // The error handler answers these without logging; the reason behind a 5xx belongs in the log.
  app.addHook('onError', async (request, _reply, error) => {
    if (error instanceof IdpUnavailableError) {
      request.log.warn({ reason: error.reason }, 'identity provider unavailable');
    } else if (error instanceof NoteStoreError && error.statusCode >= 500) {
      const { message, code, details, hint } = error.storeError;
      request.log.error({ store: { status: error.storeStatus, message, code, details, hint } }, 'note store error');
    } else if (error instanceof HttpError && error.statusCode >= 500) {
      request.log.error({ err: error }, 'server error');
    }
  });

  const identity = createIdentity(clients);
  await app.register(authRoutes, { prefix: '/auth', identity, publicUrl: config.NOTES_PUBLIC_URL });
  await app.register(sessionRoutes, { prefix: '/auth', identity, verifyToken });
  await app.register(notesRoutes, { prefix: '/notes', store: createNotesStore(clients), verifyToken });
  await app.register(webPagesRoutes);
  return app;
}
