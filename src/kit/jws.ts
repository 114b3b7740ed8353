// Rules on compact JWS tokens shared by every service that verifies them (accounts its own HS256
// tokens; the idp and notes the idp's ES256 ones).

/** How far in the future `nbf` / `iat` may be: the clocks of several instances drift a little. `exp` gets none. */
export const CLOCK_SKEW_SECONDS = 30;

/** A base64url segment's JSON when it is an object (not an array, not null); else undefined. */
export function decodeJsonSegment(segment: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Three base64url segments, without padding or any other character. */
export const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * Decoders ignore the spare low bits of a segment's last character, so one segment has several
 * spellings that decode alike: only the canonical one (what encoding its bytes gives) is accepted.
 */
export const isCanonicalBase64url = (part: string): boolean => Buffer.from(part, 'base64url').toString('base64url') === part;

/**
 * jose decodes leniently: a signature with `=` padding, or with the spare low bits of its last
 * character set, verifies like the issued one. Only the exact issued spelling is a token, so a
 * token string cannot be varied to slip past anything keyed on it.
 */
export function isCanonicalCompactJws(token: string): boolean {
  return COMPACT_JWS.test(token) && token.split('.').every(isCanonicalBase64url);
}

// ES256 (ECDSA P-256) signature malleability. An ECDSA signature (r, s) has a twin (r, n − s) that
// verifies just as well, so anyone holding a token can mint a second, different token string with
// the same claims without the key. Whatever keys on the token string (caches, revocation or replay
// lists, logs) then sees two tokens. The fix used by Bitcoin and many JOSE stacks: only the "low-s"
// half (s ≤ n/2) is a valid spelling. The idp signs only low-s; the idp and notes accept only
// low-s. Shared here because both services verify the idp's tokens.

/** The order n of the P-256 group (FIPS 186-4 D.1.2.3). */
const P256_ORDER = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const P256_HALF_ORDER = P256_ORDER >> 1n;

/** JOSE's ES256 signature: r and s, 32 bytes each, big-endian (RFC 7518 §3.4). */
const ES256_SIGNATURE_BYTES = 64;

const toBigInt = (bytes: Uint8Array): bigint => BigInt(`0x${Buffer.from(bytes).toString('hex') || '0'}`);

/** True when `signature` is a 64-byte r||s whose s is in 1 … n/2. */
export function isLowSEs256Signature(signature: Uint8Array): boolean {
  if (signature.length !== ES256_SIGNATURE_BYTES) return false;
  const s = toBigInt(signature.subarray(32));
  return s >= 1n && s <= P256_HALF_ORDER;
}

/** The low-s twin of a 64-byte r||s signature (the signature itself when already low). */
export function toLowSEs256Signature(signature: Uint8Array): Buffer {
  if (signature.length !== ES256_SIGNATURE_BYTES) throw new Error('an ES256 signature is 64 bytes');
  const s = toBigInt(signature.subarray(32));
  if (s <= P256_HALF_ORDER) return Buffer.from(signature);
  const low = Buffer.from((P256_ORDER - s).toString(16).padStart(64, '0'), 'hex');
  return Buffer.concat([signature.subarray(0, 32), low]);
}

/** Whether a compact ES256 JWS carries a low-s signature (false for anything not shaped like one). */
export function hasLowSSignature(compactJws: string): boolean {
  const parts = compactJws.split('.');
  if (parts.length !== 3) return false;
  return isLowSEs256Signature(Buffer.from(parts[2]!, 'base64url'));
}

/** A compact ES256 JWS with its signature replaced by the low-s twin. */
export function withLowSSignature(compactJws: string): string {
  const parts = compactJws.split('.');
  if (parts.length !== 3) throw new Error('not a compact JWS');
  const signature = toLowSEs256Signature(Buffer.from(parts[2]!, 'base64url'));
  return `${parts[0]}.${parts[1]}.${signature.toString('base64url')}`;
}
