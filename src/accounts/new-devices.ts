import type { Clock } from '../kit/clock.js';
import type { PoolClient } from '../kit/db.js';
import type { MailOutbox } from '../kit/service.js';
import type { AuditLog, Origin } from './audit.js';
import { deviceName } from './devices.js';
import { notifyUser } from './factors.js';
import type { Account } from './repository.js';

/** The longest device kept: a user agent no browser parser recognises is kept as sent, up to this. */
const DEVICE_MAX = 512;

/**
 * What "a device" is for the new-device mail: the browser and system a User-Agent names
 * ("Chrome on Linux"), or, for a client naming no browser, its User-Agent as sent; a request
 * without one is "Unknown device". Coarse on purpose: a new browser or system is news to the
 * user; a new address or a browser update is not.
 */
export function deviceOf(userAgent: string | undefined): string {
  return deviceName(userAgent ?? null) ?? (userAgent?.trim().slice(0, DEVICE_MAX) || 'Unknown device');
}

/** "2026-01-01 12:00 UTC" */
const inWords = (ms: number) => `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;

/**
 * The devices each account signed in from (known_devices), and the mail of a sign-in from one
 * never seen before. Not on the account's first sign-in: there is nothing earlier to compare with.
 */
export class NewDevices {
  constructor(
    private readonly audit: AuditLog,
    private readonly mail: MailOutbox | undefined,
    private readonly clock: Clock,
  ) {}

  /**
   * In the sign-in's transaction, one statement: the device is recorded (or its last sighting
   * moved), and whether it is new and the account had signed in before is read in the same
   * snapshot. Only a new device of a known account costs more: its audit row and its mail,
   * sent with the sign-in's commit (the mail worker's next round).
   */
  async signedIn(db: PoolClient, account: Account, origin: Origin): Promise<void> {
    const device = deviceOf(origin.userAgent);
    const now = this.clock();
    const { rows } = await db.query<{ inserted: boolean; earlier: boolean }>(
      `WITH earlier AS (SELECT EXISTS (SELECT 1 FROM known_devices WHERE user_id = $1) AS earlier),
            seen AS (
              INSERT INTO known_devices (user_id, device, first_seen_at, last_seen_at) VALUES ($1, $2, $3, $3)
              ON CONFLICT (user_id, device) DO UPDATE SET last_seen_at = EXCLUDED.last_seen_at
              RETURNING (xmax = 0) AS inserted)
       SELECT seen.inserted, earlier.earlier FROM seen, earlier`,
      [account.user.id, device, new Date(now)],
    );
    if (!rows[0]?.inserted || !rows[0].earlier) return;
    const userId = account.user.id;
    await this.audit.record({ event: 'new_device_sign_in', actorId: userId, targetId: userId, origin, details: { device } }, db);
    await notifyUser(this.mail, db, account.user, {
      subject: `New sign-in from ${device}`,
      text:
        `Your account was signed in to from a device it was not used on before: ${device}, on ${inWords(now)}, ` +
        `from the address ${origin.ip}. If this was you, there is nothing to do. If not, change your password now ` +
        'and end that session under "Where you are signed in" on your account page.',
    });
  }
}
