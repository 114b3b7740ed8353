import { randomBytes } from 'node:crypto';

export const CODE_LENGTH = 7;
export const CODE_PATTERN = /^[0-9a-zA-Z]{7}$/;
/**
 * Every code a link can have: the generated ones (CODE_PATTERN) and the ones
 * chosen at creation, 3 to 64 letters, digits, "_" and "-". Anything else is
 * malformed (rule 4): a 404 without a database query.
 */
export const LINK_CODE_PATTERN = /^[A-Za-z0-9_-]{3,64}$/;
const ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';

// 256 is not a multiple of 62: bytes from 248 (= 4 × 62) up would make the
// first eight symbols more likely, so they are thrown away and redrawn.
const UNBIASED_LIMIT = 256 - (256 % ALPHABET.length);

export type CodeGenerator = () => string;

/** A code from cryptographically random bytes, each symbol equally likely. */
export const randomCode: CodeGenerator = () => {
  let code = '';
  while (code.length < CODE_LENGTH) {
    for (const byte of randomBytes(CODE_LENGTH * 2)) {
      if (byte >= UNBIASED_LIMIT) continue;
      code += ALPHABET[byte % ALPHABET.length];
      if (code.length === CODE_LENGTH) break;
    }
  }
  return code;
};
