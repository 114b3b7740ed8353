import { HttpError } from '../kit/http/errors.js';
import { defineService } from '../kit/service.js';
import { NOTES_DOCUMENT } from './schemas.js';
import { createMetricsRegistry } from '../kit/http/metrics.js';
import { notesConfig } from './config.js';
import { createIdentity } from './identity.js';
import { boundedFetch, createIdpClients, type IdpFetch, jwksUrl } from './idp-clients.js';
import { IdpUnavailableError, NoteStoreError } from './idp-errors.js';
import { measuredIdpFetch } from './idp-metrics.js';
import { createNotesStore } from './notes-store.js';
import { authRoutes, sessionRoutes } from './routes/auth.js';
import { browserSessionRoutes } from './routes/browser-session.js';
import { notesRoutes } from './routes/notes.js';
import { webPagesRoutes } from './routes/web-pages.js';
import { createTokenVerifier } from './token-verifier.js';

/** What tests may hand the notes service. */
export interface NotesDeps {
  /** Every request to the provider goes through this (tests count them); default: global fetch. */
  fetch: IdpFetch;
}

// Readiness must answer quickly even when the provider hangs.
const READINESS_TIMEOUT_MS = 2000;

/** The notes service: identity and storage both live at the provider, reached only through supabase-js. */
export const notes = defineService<typeof notesConfig, NotesDeps>({
  name: 'notes',
  config: notesConfig,
  database: false,
  async build({ config, clock, deps, log, httpApp }) {
    log.info(`identity provider ${config.IDP_URL}, token verification ${config.IDP_VERIFY}`);
    // Made before the server: every request to the provider is counted on its way out.
    const metrics = createMetricsRegistry();
    const idpFetch = measuredIdpFetch(metrics, deps.fetch);
    const clients = createIdpClients(config, idpFetch);
    const verifyToken = createTokenVerifier(config.IDP_VERIFY, {
      clients,
      idpUrl: config.IDP_URL,
      publishableKey: config.IDP_PUBLISHABLE_KEY,
      timeoutMs: config.IDP_TIMEOUT_MS,
      clock,
      fetch: idpFetch,
    });
    const pingIdp = boundedFetch(Math.min(READINESS_TIMEOUT_MS, config.IDP_TIMEOUT_MS), idpFetch);

    const app = await httpApp({
      title: 'notes',
      description:
        'Private notes. Identity is delegated to a Supabase-compatible provider; /notes routes need `Authorization: Bearer <access_token>` from /auth/login.',
      errorBody: (_status, message) => ({ message }),
      document: NOTES_DOCUMENT,
      readiness: async () => {
        const res = await pingIdp(jwksUrl(config.IDP_URL), { headers: { apikey: config.IDP_PUBLISHABLE_KEY } });
        // Read, not cancelled: the body is a few hundred bytes, and reading ends the request's timer.
        await res.arrayBuffer();
        if (!res.ok) throw new Error(`identity provider answered ${res.status}`);
      },
      notReadyMessage: 'Service not ready: identity provider unreachable',
      metrics: { registry: metrics },
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
    await app.register(browserSessionRoutes, { identity, verifyToken });
    await app.register(webPagesRoutes);
    return app;
  },
});
