import { Type } from '@sinclair/typebox';
import QRCode from 'qrcode';
import { HttpError, notFound } from '../../kit/http/errors.js';
import type { App } from '../../kit/http/app.js';
import { isWellFormedCode, type LinkService } from '../links.js';
import { CodeParams } from './schemas.js';
import { ErrorEnvelope } from '../../kit/http/status-envelope.js';
import { described } from '../../kit/http/openapi.js';

export const QR_SIZE = { min: 64, max: 1024, default: 256 } as const;
/**
 * A 1024-pixel PNG is drawn as 4 MiB of RGBA in this process (about 20 ms of
 * CPU): at most this many are drawn at once, at most QR_QUEUE_LIMIT more wait,
 * and beyond that a request gets a 503 at once, so a flood of PNG requests
 * holds a bounded amount of memory and cannot queue without end.
 */
export const QR_PNG_CONCURRENCY = 2;
export const QR_QUEUE_LIMIT = 64;
/**
 * A code's short URL never changes (a deleted code is never issued again), so
 * the image may be cached; an hour bounds how long a cache keeps showing the
 * QR code of a link that was deleted since.
 */
export const QR_CACHE_CONTROL = 'public, max-age=3600';

const QrQuery = Type.Object(
  {
    // An enum rather than a union of literals: one error, "must be equal to one of the allowed values".
    format: Type.Unsafe<'svg' | 'png'>({ type: 'string', enum: ['svg', 'png'], default: 'svg', description: 'Image format' }),
    size: Type.Integer({ minimum: QR_SIZE.min, maximum: QR_SIZE.max, default: QR_SIZE.default, description: 'Width and height in pixels' }),
  },
  { additionalProperties: false },
);

/** The options both formats are drawn with, so an SVG and a PNG of a link hold the same symbol. */
export const qrOptions = (size: number) => ({ errorCorrectionLevel: 'M' as const, margin: 4, width: size });

/** Runs at most `limit` jobs at once; a bounded number wait, the rest are refused. */
export class RenderGate {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly limit: number,
    private readonly queueLimit: number,
  ) {}

  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) {
      if (this.waiting.length >= this.queueLimit) {
        throw new HttpError(503, 'Too many QR codes being drawn, try again shortly', { 'retry-after': '1' });
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running += 1;
    }
    try {
      return await job();
    } finally {
      // The slot passes straight to the next waiter, so `running` never over-counts.
      const next = this.waiting.shift();
      if (next) next();
      else this.running -= 1;
    }
  }
}

export async function linkQrRoute(app: App, { links, baseUrl }: { links: LinkService; baseUrl: string }): Promise<void> {
  const pngGate = new RenderGate(QR_PNG_CONCURRENCY, QR_QUEUE_LIMIT);

  app.get(
    '/api/links/:code/qr',
    {
      schema: {
        tags: ['links'],
        summary: "QR code of a link's short_url (SVG by default, or PNG)",
        description: `size is the image width and height in pixels, ${QR_SIZE.min}–${QR_SIZE.max} (default ${QR_SIZE.default}).`,
        params: CodeParams,
        querystring: QrQuery,
        produces: ['image/svg+xml', 'image/png'],
        response: {
          200: Type.Unsafe<Buffer | string>({ type: 'string', format: 'binary', description: 'image/svg+xml or image/png' }),
          400: ErrorEnvelope,
          404: described(ErrorEnvelope, 'No link has this code', { status: 404, response: 'Not Found', message: 'Link not found' }),
          503: described(ErrorEnvelope, 'Too many PNGs being drawn at once, or the database is unavailable (Retry-After)', {
            status: 503,
            response: 'Service Unavailable',
            message: 'Too many QR codes being drawn, try again shortly',
          }),
        },
      },
    },
    async (request, reply) => {
      const { code } = request.params;
      // Rule 4: a malformed code never reaches the database.
      if (!isWellFormedCode(code)) throw notFound('Link not found');
      const link = await links.find(code);
      if (!link) throw notFound('Link not found');
      const shortUrl = `${baseUrl}/${link.code}`;
      const { format, size } = request.query;
      void reply
        .header('cache-control', QR_CACHE_CONTROL)
        .header('x-content-type-options', 'nosniff')
        // Opened on its own, the image may do nothing but show itself.
        .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'");
      if (format === 'png') {
        // filterType 1 (Sub) instead of trying every PNG filter per row: a third
        // of the CPU, and for two-colour blocks a file as small.
        const png = await pngGate.run(() =>
          QRCode.toBuffer(shortUrl, { ...qrOptions(size), type: 'png', rendererOpts: { filterType: 1 } } as QRCode.QRCodeToBufferOptions),
        );
        return reply.type('image/png').send(png);
      }
      const svg = await QRCode.toString(shortUrl, { ...qrOptions(size), type: 'svg' });
      return reply.type('image/svg+xml; charset=utf-8').send(svg);
    },
  );
}
