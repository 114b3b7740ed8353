import { createHash, randomBytes } from 'node:crypto';

/** How many recovery codes a set has. */
export const RECOVERY_CODE_COUNT = 10;

// 10 characters of a 32-letter alphabet without look-alikes (no 0/O, 1/I/L): 50 bits each,
// far beyond the attempt budget, so a SHA-256 is enough to store them (no slow hash needed).
const ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
const LENGTH = 10;

/** A new set, shown to the user once, in the form "ABCDE-FGHJK". */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const bytes = randomBytes(LENGTH);
    let code = '';
    // 256 is not a multiple of 31: redraw the few bytes that would bias the first letters.
    for (let i = 0; code.length < LENGTH; i++) {
      const byte = i < bytes.length ? bytes[i]! : randomBytes(1)[0]!;
      if (byte < 248) code += ALPHABET[byte % ALPHABET.length];
    }
    return `${code.slice(0, 5)}-${code.slice(5)}`;
  });
}

/** As typed: any case, with or without the dash or spaces; undefined when it cannot be a code. */
export function normalizeRecoveryCode(input: string): string | undefined {
  const clean = input.replace(/[\s-]/g, '').toUpperCase();
  if (clean.length !== LENGTH || [...clean].some((c) => !ALPHABET.includes(c))) return undefined;
  return clean;
}

/** What is stored: the SHA-256 of the normalized code. */
export function recoveryCodeHash(normalized: string): Buffer {
  return createHash('sha256').update(normalized).digest();
}
