import { createPrivateKey, createPublicKey, generateKeyPairSync, type JsonWebKey, type KeyObject } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, type JWK } from 'jose';
import { ConfigError, type VarSpec } from './config.js';

// ES256 (ECDSA P-256) signing keys, as the idp and accounts keep them: a private key given as PEM
// or as a JWK with "d" (else generated once under DATA_DIR), published as a public JWK whose kid is
// its RFC 7638 thumbprint, so every instance holding the same key names it alike.

const isP256 = (key: KeyObject): boolean => key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';

/** PEM (PKCS#8 or SEC1) or JWK text of a P-256 private key; throws on anything else. */
export function parseEs256PrivateKey(source: string): KeyObject {
  const trimmed = source.trim();
  const key = trimmed.startsWith('{')
    ? createPrivateKey({ key: JSON.parse(trimmed) as JsonWebKey, format: 'jwk' })
    : createPrivateKey(trimmed);
  if (!isP256(key)) throw new Error('not a P-256 key');
  return key;
}

/** A P-256 public key, from a JWK without "d" or a PEM public key; a private key is refused, not reduced to its public half. */
export function parseEs256PublicKey(source: JsonWebKey | string): KeyObject {
  if (typeof source === 'object' && 'd' in source) throw new Error('a private key');
  if (typeof source === 'string' && /PRIVATE KEY/.test(source)) throw new Error('a private key');
  const key = typeof source === 'string' ? createPublicKey(source) : createPublicKey({ key: source, format: 'jwk' });
  if (!isP256(key)) throw new Error('not a P-256 key');
  return key;
}

/** A new P-256 private key as PKCS#8 PEM, for keeping under DATA_DIR. */
export const generateEs256PrivateKeyPem = (): string =>
  generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

/** The public JWK of a P-256 key (public or private), with its thumbprint as kid. */
export async function es256PublicJwk(key: KeyObject): Promise<JWK> {
  const { kty, crv, x, y } = await exportJWK(key.type === 'private' ? createPublicKey(key) : key);
  // The thumbprint depends only on the key, so every instance with the same key agrees on the kid.
  const kid = await calculateJwkThumbprint({ kty, crv, x, y });
  return { kty, crv, x, y, kid, alg: 'ES256', use: 'sig', key_ops: ['verify'] };
}

/** A P-256 private key variable (PEM PKCS#8/SEC1 or a JWK with `d`), checked once so a bad key stops the start. */
export const es256PrivateKey = (): VarSpec<string, false> => ({
  parse: (raw, name) => {
    try {
      parseEs256PrivateKey(raw);
    } catch {
      throw new ConfigError(name, 'must be an ES256 (EC P-256) private key, as PEM or as a JWK with "d"');
    }
    return raw.trim();
  },
});
