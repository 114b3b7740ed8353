import http from 'node:http';
import type { AddressInfo } from 'node:net';

// Where the short links of the browser tests lead: a site of its own origin on 127.0.0.1, so a
// redirect lands on a real page, and a test can tell which of its pages were asked for.

export interface TargetSite {
  origin: string;
  /** The paths asked for, in order; not the favicon, which the browser asks for on its own. */
  hits: string[];
  close(): Promise<void>;
}

/** Answers every path with one small page, of this title and first heading. */
export async function startTargetSite(title: string, heading = title): Promise<TargetSite> {
  const hits: string[] = [];
  const server = http.createServer((req, res) => {
    if (req.url !== '/favicon.ico') hits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><html lang="en"><head><title>${title}</title></head><body><main><h1>${heading}</h1></main></body></html>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
