// Client addresses for tests: the one way tests make them up.
import { randomBytes } from 'node:crypto';

/**
 * A block of client addresses of its own: consecutive addresses of 10.0.0.0/8 from a random start,
 * the n-th always the same one. Random, so tests sharing one Redis (other files, other runs) never
 * share a per-address counter.
 */
export function clientIps(): (n: number) => string {
  const base = randomBytes(3).readUIntBE(0, 3);
  return (n) => {
    const v = (base + n) % 0x1000000;
    return `10.${(v >> 16) & 255}.${(v >> 8) & 255}.${v & 255}`;
  };
}

const fresh = clientIps();
let used = 0;

/** An address no other call of this test process has returned, so a per-address limit never gets in the way. */
export function uniqueIp(): string {
  return fresh(used++);
}
