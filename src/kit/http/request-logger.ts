import type { FastifyBaseLogger } from 'fastify';

// Fastify gives every request a child of the app's logger carrying its request
// id. Making a pino child costs more than the rest of a redirect's logging put
// together, and at the usual production level (warn) most requests log nothing
// at all. So a request's logger makes its child on the first line actually
// written: a line below the level is dropped on a level check, as pino itself
// would drop it, and a line that is written goes through the same child
// (`parent.child({ reqId }, opts)`) as before, so every line is unchanged.

type Bindings = Parameters<FastifyBaseLogger['child']>[0];
type ChildOptions = NonNullable<Parameters<FastifyBaseLogger['child']>[1]>;
type LogMethod = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

class RequestLogger {
  #child: FastifyBaseLogger | undefined;
  readonly #parent: FastifyBaseLogger;
  readonly #bindings: Bindings;
  readonly #options: ChildOptions;

  constructor(parent: FastifyBaseLogger, bindings: Bindings, options: ChildOptions) {
    this.#parent = parent;
    this.#bindings = bindings;
    this.#options = options;
  }

  #logger(): FastifyBaseLogger {
    this.#child ??= this.#parent.child(this.#bindings, this.#options);
    return this.#child;
  }

  #write(method: LogMethod, args: unknown[]): void {
    // The parent's level, read at each line: a child without its own level follows it.
    const logger = this.#child ?? (isLevelEnabled(this.#parent, method) ? this.#logger() : undefined);
    if (logger === undefined) return;
    (logger[method] as (...a: unknown[]) => void)(...args);
  }

  get level(): string {
    return this.#child?.level ?? this.#parent.level;
  }
  set level(level: string) {
    this.#logger().level = level;
  }

  fatal(...args: unknown[]): void {
    this.#write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.#write('error', args);
  }
  warn(...args: unknown[]): void {
    this.#write('warn', args);
  }
  info(...args: unknown[]): void {
    this.#write('info', args);
  }
  debug(...args: unknown[]): void {
    this.#write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.#write('trace', args);
  }
  silent(): void {}
  child(...args: Parameters<FastifyBaseLogger['child']>): FastifyBaseLogger {
    return this.#logger().child(...args);
  }
  isLevelEnabled(level: string): boolean {
    return isLevelEnabled(this.#child ?? this.#parent, level);
  }
}

/** Whether `logger` writes lines of `level` (the typings of Fastify's logger do not name the check). */
export function isLevelEnabled(logger: FastifyBaseLogger, level: string): boolean {
  const check = (logger as { isLevelEnabled?: (level: string) => boolean }).isLevelEnabled;
  // A logger without the check (none of pino's): always make the child, as before.
  return typeof check === 'function' ? check.call(logger, level) : true;
}

/**
 * Fastify's `childLoggerFactory`: a request logger that makes its pino child on its first written
 * line. A route with its own level or serializers gets its child at once, as Fastify would give it.
 */
export function lazyRequestLogger(logger: FastifyBaseLogger, bindings: Bindings, opts: ChildOptions): FastifyBaseLogger {
  if (opts.level !== undefined || opts.serializers !== undefined) return logger.child(bindings, opts);
  return new RequestLogger(logger, bindings, opts) as unknown as FastifyBaseLogger;
}
