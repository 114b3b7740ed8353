import http from 'node:http';

// A small HTTP client for fault and load tests: real sockets to 127.0.0.1,
// every outcome classified (a full response, or a failure before/after the
// response began) and timed, and load loops that are bounded in count and in
// time, so a broken service can fail a test but never hang it.

export interface Target {
  /** http://127.0.0.1:<port> */
  url: string;
  agent?: http.Agent | false;
  /** The local address to connect from (a loopback address other than 127.0.0.1 plays another client). */
  localAddress?: string;
}

export interface RequestSpec {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  /** Sent as JSON. */
  json?: unknown;
}

export interface Answered {
  ok: true;
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  ms: number;
}

export interface Failed {
  ok: false;
  /** ECONNREFUSED, ECONNRESET, TIMEOUT, ... */
  error: string;
  /** Whether the status line had arrived: a failure after it is a response cut mid-way. */
  responseStarted: boolean;
  /** Whether the request went out on a kept-alive connection that had served an earlier request. */
  reusedSocket: boolean;
  ms: number;
}

export type Outcome = Answered | Failed;

export function send(target: Target, spec: RequestSpec, timeoutMs = 10_000): Promise<Outcome> {
  const started = performance.now();
  const url = new URL(target.url);
  const body = spec.json === undefined ? undefined : JSON.stringify(spec.json);
  const headers: Record<string, string> = { ...spec.headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(body));
  }
  return new Promise((resolve) => {
    let settled = false;
    let responseStarted = false;
    const finish = (outcome: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const fail = (err: NodeJS.ErrnoException | Error) =>
      finish({
        ok: false,
        error: (err as NodeJS.ErrnoException).code ?? err.message,
        responseStarted,
        reusedSocket: req.reusedSocket,
        ms: performance.now() - started,
      });
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        method: spec.method ?? 'GET',
        path: spec.path,
        headers,
        agent: target.agent,
        localAddress: target.localAddress,
      },
      (res) => {
        responseStarted = true;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('aborted', () => fail(new Error('ABORTED')));
        res.on('error', fail);
        res.on('end', () => {
          if (!res.complete) return fail(new Error('INCOMPLETE'));
          finish({
            ok: true,
            status: res.statusCode ?? 0,
            headers: res.headers,
            text: Buffer.concat(chunks).toString('utf8'),
            ms: performance.now() - started,
          });
        });
      },
    );
    const timer = setTimeout(() => {
      fail(new Error('TIMEOUT'));
      req.destroy();
    }, timeoutMs);
    req.on('error', fail);
    req.end(body);
  });
}

/** Parses the body as JSON, or undefined when it is not JSON. */
export function jsonOf(outcome: Outcome): unknown {
  if (!outcome.ok) return undefined;
  try {
    return JSON.parse(outcome.text) as unknown;
  } catch {
    return undefined;
  }
}

export interface LoadOptions {
  /** Requests in flight at once. */
  concurrency: number;
  /** Stop after this many requests (always set: every loop is bounded). */
  total: number;
  /** And stop at this time (ms since the epoch) at the latest. */
  deadline?: number;
  /** Or stop as soon as this returns true. */
  stop?: () => boolean;
  /** The i-th request; undefined ends the run. */
  next: (i: number) => { target: Target; spec: RequestSpec } | undefined;
  onOutcome?: (outcome: Outcome, i: number, spec: RequestSpec) => void;
  timeoutMs?: number;
}

export interface LoadSummary {
  sent: number;
  elapsedMs: number;
  rps: number;
  statuses: Record<string, number>;
}

/** A closed-loop load: `concurrency` workers, each sending its next request when its last one is answered. */
export async function runLoad(opts: LoadOptions): Promise<LoadSummary> {
  const started = performance.now();
  const statuses: Record<string, number> = {};
  let issued = 0;
  const worker = async () => {
    for (;;) {
      if (issued >= opts.total || (opts.deadline !== undefined && Date.now() >= opts.deadline) || opts.stop?.()) return;
      const i = issued++;
      const request = opts.next(i);
      if (!request) return;
      const outcome = await send(request.target, request.spec, opts.timeoutMs);
      const key = outcome.ok ? String(outcome.status) : outcome.error;
      statuses[key] = (statuses[key] ?? 0) + 1;
      opts.onOutcome?.(outcome, i, request.spec);
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  const elapsedMs = performance.now() - started;
  return { sent: issued, elapsedMs, rps: issued / (elapsedMs / 1000), statuses };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Polls until `check` holds; throws after `ms`. Returns how long it took. */
export async function waitUntil(check: () => boolean | Promise<boolean>, ms: number, what: string, everyMs = 50): Promise<number> {
  const started = performance.now();
  for (;;) {
    if (await check()) return performance.now() - started;
    if (performance.now() - started > ms) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** A keep-alive agent with a bounded number of sockets. */
export const keepAliveAgent = (maxSockets: number) => new http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
