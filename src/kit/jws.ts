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
