import type { Clock } from '../../kit/clock.js';
import { type CounterStore, FixedWindowLimiter } from '../../kit/rate-limit.js';
import { RestError } from './errors.js';

// Bounds on what one caller can write through REST. PostgREST has none of its own (a hosted project
// relies on its gateway and database); without them one user inserted 200,000 rows in 4.5 s.
// - A write request may carry at most `maxRows` rows (and the route's body limit in bytes).
// - Each caller may write `writesPerMinute` units a minute: an insert counts its rows, any other
//   write (update, delete, a call of a volatile function) counts one. They are counted before the
//   write runs, so concurrent requests cannot pass the limit together; a refused request counts
//   too. A user is counted by their id, the anonymous role by client address; the secret key
//   (service_role, the application's own server) is not limited.

const WINDOW_MS = 60_000;

export interface WriteLimitSettings {
  maxRows: number;
  writesPerMinute: number;
  ipv6Prefix: number;
  ipv6WidePrefix: number;
}

/** Who a write is counted against. */
export interface Writer {
  role: 'anon' | 'authenticated' | 'service_role';
  /** The user's id (the token's `sub`), for authenticated. */
  userId: string | null;
  ip: string | undefined;
}

export class WriteLimits {
  private readonly limiter: FixedWindowLimiter;

  constructor(
    store: CounterStore,
    clock: Clock,
    private readonly settings: WriteLimitSettings,
  ) {
    this.limiter = new FixedWindowLimiter(settings.writesPerMinute, WINDOW_MS, store, clock);
  }

  /** 413 when an insert sends more rows than one request may. */
  checkRows(rows: number): void {
    if (rows <= this.settings.maxRows) return;
    throw new RestError(
      413,
      'PGRST102',
      'Too many rows in the request body',
      `At most ${this.settings.maxRows} rows may be written by one request; this one has ${rows}.`,
      'Send the rows in several requests.',
    );
  }

  /** Counts `units` for the writer; 429 (with the seconds to wait) when that passes the limit. */
  async charge(writer: Writer, units: number): Promise<void> {
    if (writer.role === 'service_role') return;
    // A signed-in writer is counted as the user; an anonymous one by address, IPv6 per /64 and per /48.
    const decision =
      writer.userId !== null
        ? await this.limiter.consume(`user:${writer.userId}`, units)
        : await this.limiter.consumeAddress(
            'ip:',
            writer.ip,
            { prefix: this.settings.ipv6Prefix, widePrefix: this.settings.ipv6WidePrefix },
            units,
          );
    if (!decision.limited) return;
    const error = new RestError(
      429,
      'over_request_rate_limit',
      'Too many writes',
      `At most ${this.settings.writesPerMinute} rows may be written per minute (an insert counts its rows, any other write one); try again in ${decision.retryAfterSeconds} seconds.`,
    );
    error.retryAfterSeconds = Math.max(1, decision.retryAfterSeconds);
    throw error;
  }
}
