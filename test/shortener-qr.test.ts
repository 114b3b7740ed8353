import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import jsQRModule from 'jsqr';
import { PNG } from 'pngjs';
import { HttpError } from '../src/kit/http/errors.js';
import { QR_CACHE_CONTROL, QR_SIZE, RenderGate } from '../src/shortener/routes/link-qr.js';
import { watchQueries } from './helpers/database.js';
import { assertEnvelope, createCode, sharedShortener } from './helpers/shortener.js';

// jsqr is CommonJS whose module.exports is the function itself, while its types declare an ES default export.
const jsQR = jsQRModule as unknown as typeof jsQRModule.default;

const ADMIN_KEY = 'q'.repeat(40);

let code: string;

const ctx = sharedShortener({ env: { SHORTENER_ADMIN_KEY: ADMIN_KEY } }, async () => {
  code = await createCode(ctx.app, 'https://example.com/a/page/with/a/qr');
});

const qr = (query: string, c = code) => ctx.app.inject({ method: 'GET', url: `/api/links/${c}/qr${query}` });

/** Reads the QR code in an RGBA image; undefined when none is found. */
function decode(rgba: Uint8Array, width: number, height: number): string | undefined {
  return jsQR(new Uint8ClampedArray(rgba.buffer, rgba.byteOffset, rgba.byteLength), width, height)?.data;
}

function decodePng(body: Buffer): { text: string | undefined; width: number; height: number } {
  const png = PNG.sync.read(body);
  return { text: decode(png.data, png.width, png.height), width: png.width, height: png.height };
}

/**
 * Draws the SVG the way a browser would, for the shapes qrcode writes: a white
 * background and one path of horizontal strokes, one module high, along the
 * middle of each row ("M x y", relative "m dx dy", "h n"). Each module becomes
 * 8×8 pixels of an RGBA image, which jsQR then reads.
 */
function rasteriseSvg(svg: string): { rgba: Uint8Array; side: number } {
  const viewBox = /viewBox="0 0 (\d+) (\d+)"/.exec(svg);
  assert.ok(viewBox, 'no viewBox');
  const modules = Number(viewBox[1]);
  assert.equal(Number(viewBox[2]), modules);
  const path = /<path stroke="#000000" d="([^"]+)"/.exec(svg)?.[1];
  assert.ok(path, 'no dark path');
  const dark = new Set<string>();
  let x = 0;
  let y = 0;
  for (const [, op, args] of path.matchAll(/([MmHh])([^MmHh]*)/g)) {
    const n = args!
      .trim()
      .split(/[\s,]+/)
      .map(Number);
    if (op === 'M') [x, y] = [n[0]!, n[1]!];
    else if (op === 'm') [x, y] = [x + n[0]!, y + n[1]!];
    else if (op === 'h') {
      for (let i = 0; i < n[0]!; i++) dark.add(`${x + i},${Math.floor(y)}`);
      x += n[0]!;
    } else assert.fail(`unexpected path command ${op}`);
  }
  const scale = 8;
  const side = modules * scale;
  const rgba = new Uint8Array(side * side * 4).fill(255);
  for (let py = 0; py < side; py++) {
    for (let px = 0; px < side; px++) {
      if (!dark.has(`${Math.floor(px / scale)},${Math.floor(py / scale)}`)) continue;
      const i = (py * side + px) * 4;
      rgba[i] = rgba[i + 1] = rgba[i + 2] = 0;
    }
  }
  return { rgba, side };
}

describe('GET /api/links/:code/qr', () => {
  it('PNG: image/png of the requested size, cacheable, and it decodes to the short URL', async () => {
    for (const size of [QR_SIZE.min, 200, QR_SIZE.default, QR_SIZE.max]) {
      const res = await qr(`?format=png&size=${size}`);
      assert.equal(res.statusCode, 200, res.body);
      assert.equal(res.headers['content-type'], 'image/png');
      assert.equal(res.headers['cache-control'], QR_CACHE_CONTROL);
      assert.equal(res.headers['x-content-type-options'], 'nosniff');
      assert.deepEqual(res.rawPayload.subarray(0, 8), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
      const { text, width, height } = decodePng(res.rawPayload);
      assert.equal(width, size);
      assert.equal(height, size);
      assert.equal(text, `https://sho.rt/${code}`, `size ${size}`);
    }
  });

  it('SVG by default: image/svg+xml of the requested size, and drawn it decodes to the short URL', async () => {
    for (const query of ['', '?format=svg', '?format=svg&size=512']) {
      const res = await qr(query);
      assert.equal(res.statusCode, 200, res.body);
      assert.match(String(res.headers['content-type']), /^image\/svg\+xml/);
      assert.equal(res.headers['cache-control'], QR_CACHE_CONTROL);
      assert.match(String(res.headers['content-security-policy']), /default-src 'none'/);
      const svg = res.body;
      assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" /);
      assert.match(svg, /<\/svg>\s*$/);
      assert.doesNotMatch(svg, /<script|on\w+=/i);
      const size = query.includes('512') ? 512 : QR_SIZE.default;
      assert.match(svg, new RegExp(`width="${size}" height="${size}"`));
      const { rgba, side } = rasteriseSvg(svg);
      assert.equal(decode(rgba, side, side), `https://sho.rt/${code}`, query);
    }
  });

  it('HEAD answers like GET without a body', async () => {
    const res = await ctx.app.inject({ method: 'HEAD', url: `/api/links/${code}/qr?format=png` });
    assert.equal(res.statusCode, 200);
    assert.equal(res.headers['content-type'], 'image/png');
  });

  it('a size outside 64–1024, a fraction, text or an unknown format is a 400 envelope naming it', async () => {
    for (const [query, name] of [
      ['?size=63', 'size'],
      ['?size=1025', 'size'],
      ['?size=0', 'size'],
      ['?size=-256', 'size'],
      ['?size=256.5', 'size'],
      ['?size=big', 'size'],
      ['?size=1e400', 'size'],
      ['?size=', 'size'],
      ['?format=gif', 'format'],
      ['?format=PNG', 'format'],
      ['?format=png&format=svg', 'format'],
    ] as const) {
      const res = await qr(query);
      assert.equal(res.statusCode, 400, `${query}: ${res.body}`);
      const message = assertEnvelope(res.json(), 400, 'Bad Request');
      assert.match(message, new RegExp(`^querystring/${name} must`), query);
      if (query === '?format=gif') assert.equal(message, 'querystring/format must be equal to one of the allowed values');
    }
  });

  it('a malformed code is a 404 without any query; an unknown or deleted code is a 404', async () => {
    const queries = watchQueries(ctx.pool);
    try {
      for (const bad of ['ab', 'a'.repeat(65), '..%2Fetc', 'abc.efg', '%00bcdefg']) {
        const res = await qr('', bad);
        assert.equal(res.statusCode, 404, bad);
        assert.equal(assertEnvelope(res.json(), 404, 'Not Found'), 'Link not found');
      }
      assert.deepEqual(queries.queries, []);
    } finally {
      queries.stop();
    }
    const unknown = await qr('?format=png', 'Unknwn1');
    assert.equal(unknown.statusCode, 404);
    assert.equal(assertEnvelope(unknown.json(), 404, 'Not Found'), 'Link not found');
    assert.equal(unknown.headers['cache-control'], undefined);

    const doomed = await createCode(ctx.app, 'https://example.com/doomed');
    assert.equal((await qr('', doomed)).statusCode, 200);
    const deleted = await ctx.app.inject({
      method: 'DELETE',
      url: `/api/links/${doomed}`,
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    assert.equal(deleted.statusCode, 200);
    for (const format of ['svg', 'png']) {
      const res = await qr(`?format=${format}`, doomed);
      assert.equal(res.statusCode, 404);
      assert.equal(assertEnvelope(res.json(), 404, 'Not Found'), 'Link not found');
    }
  });
});

describe('RenderGate', () => {
  it('runs at most `limit` jobs at once, queues a bounded number, refuses the rest with a 503', async () => {
    const gate = new RenderGate(2, 1);
    let running = 0;
    let peak = 0;
    const releases: Array<() => void> = [];
    const job = () =>
      gate.run(async () => {
        running += 1;
        peak = Math.max(peak, running);
        await new Promise<void>((resolve) => releases.push(resolve));
        running -= 1;
        return 'done';
      });
    const first = job();
    const second = job();
    const queued = job();
    await assert.rejects(job(), (err: unknown) => err instanceof HttpError && err.statusCode === 503 && err.headers['retry-after'] === '1');
    await new Promise((r) => setImmediate(r));
    assert.equal(running, 2);
    releases.shift()!();
    assert.equal(await first, 'done');
    await new Promise((r) => setImmediate(r));
    // The freed slot went to the queued job, and there is room to queue again.
    assert.equal(running, 2);
    const later = job();
    await new Promise((r) => setImmediate(r));
    assert.equal(running, 2);
    while (releases.length > 0 || running > 0) {
      releases.shift()?.();
      await new Promise((r) => setImmediate(r));
    }
    assert.deepEqual(await Promise.all([second, queued, later]), ['done', 'done', 'done']);
    assert.equal(peak, 2);
    // A job that throws frees its slot too.
    await assert.rejects(
      gate.run(async () => Promise.reject(new Error('boom'))),
      /boom/,
    );
    assert.equal(await gate.run(async () => 'after'), 'after');
  });
});
