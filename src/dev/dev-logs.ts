import { createInterface } from 'node:readline';
import { type Readable, Writable } from 'node:stream';
import { prettyFactory } from 'pino-pretty';

// What `npm start` prints of the services' logs. The services log JSON lines,
// as they should in production; on a developer's terminal the launcher shows
// them readably (pino-pretty: time, level, service, message), or as they are
// with LOG_FORMAT=json. A request is its one access line, told as "POST /notes → 201 in
// 12 ms". Health probes (/healthz, /readyz: the launcher's own
// wait for the services, any monitor's) are left out either way: they are
// noise around the lines a developer looks for.

export type LogFormat = 'pretty' | 'json';

const PROBES = new Set(['/healthz', '/readyz']);

interface LogLine {
  service?: string;
  msg?: string;
  reqId?: string;
  req?: { method?: string; url?: string };
  res?: { statusCode?: number };
  responseTime?: number;
}

export class DevLog {
  private readonly prettify: ((line: LogLine) => string) | undefined;
  private lastLineAt = Date.now();

  constructor(
    format: LogFormat,
    private readonly out: NodeJS.WritableStream = process.stdout,
    colour = Boolean((out as NodeJS.WriteStream).isTTY),
  ) {
    this.prettify =
      format === 'pretty'
        ? prettyFactory({
            colorize: colour,
            translateTime: 'HH:MM:ss.l',
            // One line per entry (a request: one line when it is answered).
            singleLine: true,
            ignore: 'pid,hostname,service',
            messageFormat: '{if service}{service}: {end}{msg}',
          })
        : undefined;
  }

  /** One line a service wrote, told as `service`'s. Lines that are not JSON (a crash's stack) pass as they are. */
  line(service: string, text: string): void {
    this.lastLineAt = Date.now();
    let entry: LogLine;
    try {
      entry = JSON.parse(text) as LogLine;
    } catch {
      this.out.write(`${text}\n`);
      return;
    }
    if (typeof entry !== 'object' || entry === null) {
      this.out.write(`${text}\n`);
      return;
    }
    if (this.isProbe(entry)) return;
    if (!this.prettify) {
      this.out.write(`${text}\n`);
      return;
    }
    this.out.write(this.prettify({ ...this.asRequestLine(entry), service: entry.service ?? service }));
  }

  /** Relays every line of a child's output. */
  relay(service: string, stream: Readable): void {
    createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (text) => this.line(service, text));
  }

  /** A stream for a pino logger of the launcher itself, whose lines are told like the services'. */
  stream(service: string): Writable {
    let rest = '';
    return new Writable({
      write: (chunk: Buffer, _encoding, done) => {
        const lines = (rest + chunk.toString('utf8')).split('\n');
        rest = lines.pop() ?? '';
        for (const text of lines) if (text) this.line(service, text);
        done();
      },
    });
  }

  /**
   * Resolves once no line has come for `idleMs` (at most after `maxMs`): what
   * the services write as they start is shown before what comes next (the banner).
   */
  async quiet(idleMs: number, maxMs: number): Promise<void> {
    const deadline = Date.now() + maxMs;
    for (;;) {
      const idleFor = Date.now() - this.lastLineAt;
      if (idleFor >= idleMs || Date.now() >= deadline) return;
      await new Promise((resolve) => setTimeout(resolve, Math.min(idleMs - idleFor, deadline - Date.now())));
    }
  }

  /** A request's access line told as one ("POST /notes → 201 in 12 ms"); any other line as it is. */
  private asRequestLine(entry: LogLine): LogLine {
    if (entry.msg !== 'request completed' || !entry.req?.url || !entry.res) return entry;
    const { req, res, responseTime, reqId: _reqId, ...rest } = entry;
    return { ...rest, msg: `${req.method ?? ''} ${req.url} → ${res.statusCode} in ${Math.round(responseTime ?? 0)} ms` };
  }

  /** A line of a health probe's request (its access line, or its incoming line at debug). */
  private isProbe(entry: LogLine): boolean {
    const url = entry.req?.url?.split('?', 1)[0];
    return url !== undefined && PROBES.has(url);
  }
}
