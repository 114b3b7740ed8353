// The kit's one way to attach a verified caller to a request (identity.ts), and the metrics
// registry kept beside its app the same way (no declaration on Fastify's types).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { buildHttpApp } from '../src/kit/http/app.js';
import { statusEnvelope } from '../src/kit/http/status-envelope.js';
import { requestSlot } from '../src/kit/http/identity.js';
import { metricsRegistry } from '../src/kit/http/metrics.js';

describe('requestSlot', () => {
  it('gives back what the authentication hook set, per request, and throws on a request it was never set for', async () => {
    const callers = requestSlot<{ id: string }>('test caller');
    const app = await buildHttpApp({ title: 'identity', logLevel: 'silent', errorBody: statusEnvelope, readiness: async () => {} });
    await app.register(async (scope) => {
      scope.addHook('onRequest', async (request) => callers.set(request, { id: String(request.headers['x-user']) }));
      scope.get('/inside', async (request) => callers.get(request));
    });
    app.get('/outside', async (request) => callers.get(request));
    try {
      assert.deepEqual((await app.inject({ url: '/inside', headers: { 'x-user': 'a' } })).json(), { id: 'a' });
      assert.deepEqual((await app.inject({ url: '/inside', headers: { 'x-user': 'b' } })).json(), { id: 'b' });
      // A route outside the scope is a bug: a 500, its cause only in the log.
      const outside = await app.inject({ url: '/outside' });
      assert.equal(outside.statusCode, 500);
      assert.ok(!outside.body.includes('test caller'));
      assert.throws(() => callers.get({} as never), /test caller read on a route outside its authenticated scope/);
    } finally {
      await app.close();
    }
  });
});

describe('metricsRegistry', () => {
  it('is the registry the app was built with, from the app and from any plugin scope inside it', async () => {
    const registry = new Registry();
    const app = await buildHttpApp({
      title: 'metrics',
      logLevel: 'silent',
      errorBody: statusEnvelope,
      readiness: async () => {},
      metrics: { registry },
    });
    let fromScope: Registry | undefined;
    await app.register(async (scope) => {
      fromScope = metricsRegistry(scope);
    });
    try {
      assert.equal(metricsRegistry(app), registry);
      assert.equal(fromScope, registry);
    } finally {
      await app.close();
    }
  });
});
