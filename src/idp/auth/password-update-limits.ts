import type { Clock } from '../../kit/clock.js';
import { type CounterStore, FixedWindowLimiter } from '../../kit/rate-limit.js';
import { countRequestFrom, refuseOverRequestRate } from './rate-limits.js';

// A password update costs two bcrypt operations (the same-password check and the new hash), so one
// token could keep both cores busy and starve every sign-in. Updates are counted per user and per
// client address, before any hashing, in the shared counters (Redis when configured).

export interface PasswordUpdateLimitSettings {
  /** Password updates per user per hour. */
  perUserPerHour: number;
  /** Password updates per client address per hour. */
  perAddressPerHour: number;
  ipv6Prefix: number;
  ipv6WidePrefix: number;
}

const HOUR = 60 * 60_000;

export class PasswordUpdateLimits {
  private readonly perUser: FixedWindowLimiter;
  private readonly perAddress: FixedWindowLimiter;

  constructor(
    storeFor: (limit: string) => CounterStore,
    clock: Clock,
    private readonly settings: PasswordUpdateLimitSettings,
  ) {
    this.perUser = new FixedWindowLimiter(settings.perUserPerHour, HOUR, storeFor('password-update-user'), clock);
    this.perAddress = new FixedWindowLimiter(settings.perAddressPerHour, HOUR, storeFor('password-update-ip'), clock);
  }

  /** One password update by `userId` from `ip`; throws 429 over_request_rate_limit past either limit. */
  async take(userId: string, ip: string): Promise<void> {
    refuseOverRequestRate(await this.perUser.consume(userId));
    await countRequestFrom(this.perAddress, ip, { prefix: this.settings.ipv6Prefix, widePrefix: this.settings.ipv6WidePrefix });
  }
}
