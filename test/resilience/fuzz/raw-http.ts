// Two ways to send a hostile request to 127.0.0.1: node:http over a keep-alive pool (well-formed
// HTTP with any method token, path bytes, headers and body), and raw bytes over a fresh socket
// (what node:http refuses to send: broken request lines, bad Content-Length, NUL bytes, raw
// UTF-8 paths, conflicting framing). Every exchange is bounded by a timeout.
import http from 'node:http';
import net from 'node:net';

export interface HttpAnswer {
  kind: 'response';
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  contentType: string | undefined;
}

export type HttpOutcome =
  | HttpAnswer
  | { kind: 'closed'; detail: string }
  | { kind: 'timeout' }
  | { kind: 'client-refused'; detail: string };

export interface PlainRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[]>;
  body?: Buffer;
}

/** A keep-alive client for one service. */
export function keepAliveClient(baseUrl: string, maxSockets: number) {
  const url = new URL(baseUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  return {
    send(req: PlainRequest, timeoutMs = 15_000): Promise<HttpOutcome> {
      return new Promise((resolve) => {
        let settled = false;
        const finish = (o: HttpOutcome) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(o);
        };
        let client: http.ClientRequest;
        try {
          client = http.request(
            {
              host: url.hostname,
              port: url.port,
              method: req.method,
              path: req.path,
              headers: req.headers,
              agent,
              setHost: req.headers.host === undefined,
            },
            (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('error', (err) => finish({ kind: 'closed', detail: `response error: ${err.message}` }));
              res.on('end', () => {
                if (!res.complete) return finish({ kind: 'closed', detail: 'response cut short' });
                const contentType = res.headers['content-type'];
                finish({
                  kind: 'response',
                  status: res.statusCode ?? 0,
                  headers: res.headers,
                  text: Buffer.concat(chunks).toString('utf8'),
                  contentType,
                });
              });
            },
          );
        } catch (err) {
          // node:http refused to send it (an invalid token or character); the generator's bug, counted apart.
          resolve({ kind: 'client-refused', detail: (err as Error).message });
          return;
        }
        const timer = setTimeout(() => {
          finish({ kind: 'timeout' });
          client.destroy();
        }, timeoutMs);
        client.on('error', (err: NodeJS.ErrnoException) => finish({ kind: 'closed', detail: `${err.code ?? ''} ${err.message}` }));
        client.end(req.body);
      });
    },
    close: () => agent.destroy(),
  };
}

/** Reads one HTTP/1.1 response (skipping 1xx) out of raw bytes; undefined until it is complete. */
export function parseRawResponse(data: Buffer, closed: boolean, headRequest = false): HttpAnswer | undefined {
  let start = 0;
  for (;;) {
    const headEnd = data.indexOf('\r\n\r\n', start);
    if (headEnd < 0) return undefined;
    const head = data.subarray(start, headEnd).toString('latin1');
    const [statusLine, ...lines] = head.split('\r\n');
    const status = Number(/^HTTP\/\d\.\d (\d{3})/.exec(statusLine ?? '')?.[1]);
    if (!Number.isInteger(status)) return undefined;
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const bodyStart = headEnd + 4;
    if (status >= 100 && status < 200) {
      start = bodyStart;
      continue;
    }
    const done = (body: Buffer): HttpAnswer => ({
      kind: 'response',
      status,
      headers,
      text: body.toString('utf8'),
      contentType: headers['content-type'],
    });
    // A response to HEAD (and a 204 or 304) has no body, whatever its Content-Length says.
    if (headRequest || status === 204 || status === 304) return done(Buffer.alloc(0));
    if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      if (data.length - bodyStart < length) return undefined;
      return done(data.subarray(bodyStart, bodyStart + length));
    }
    if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const chunks: Buffer[] = [];
      let at = bodyStart;
      for (;;) {
        const lineEnd = data.indexOf('\r\n', at);
        if (lineEnd < 0) return undefined;
        const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
        if (!Number.isFinite(size)) return done(Buffer.concat(chunks));
        if (size === 0) return done(Buffer.concat(chunks));
        if (data.length < lineEnd + 2 + size + 2) return undefined;
        chunks.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
    }
    // Neither length nor chunks: the body runs until the server closes.
    return closed ? done(data.subarray(bodyStart)) : undefined;
  }
}

/**
 * Writes `payload` on a fresh connection and waits for the first complete response, the server
 * closing, or the timeout. The write side is half-closed `halfCloseAfterMs` after the write (0: at
 * once, for requests that promise more bytes than they send): not at once in general, because
 * Node's HTTP server drops a response still being computed when the client half-closes.
 */
export function rawExchange(
  port: number,
  payload: Buffer,
  opts: { halfCloseAfterMs?: number; timeoutMs?: number } = {},
): Promise<HttpOutcome> {
  const headRequest = payload.subarray(0, 5).toString('latin1') === 'HEAD ';
  const { halfCloseAfterMs = 2_000, timeoutMs = 15_000 } = opts;
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    let data = Buffer.alloc(0);
    let settled = false;
    let halfClose: NodeJS.Timeout | undefined;
    const finish = (o: HttpOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(halfClose);
      socket.destroy();
      resolve(o);
    };
    const timer = setTimeout(() => finish({ kind: 'timeout' }), timeoutMs);
    socket.on('connect', () => {
      socket.write(payload);
      if (halfCloseAfterMs === 0) socket.end();
      else halfClose = setTimeout(() => socket.end(), halfCloseAfterMs);
    });
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const answer = parseRawResponse(data, false, headRequest);
      if (answer) finish(answer);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      const answer = parseRawResponse(data, true, headRequest);
      finish(answer ?? { kind: 'closed', detail: err.code ?? err.message });
    });
    socket.on('close', () => {
      const answer = parseRawResponse(data, true, headRequest);
      finish(
        answer ?? {
          kind: 'closed',
          detail: data.length === 0 ? 'closed without a response' : `unparsable: ${data.toString('latin1').slice(0, 80)}`,
        },
      );
    });
  });
}
