import { createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import type { JWK } from 'jose';
import { ConfigError, type VarSpec } from '../kit/config.js';
import { es256PublicJwk, generateEs256PrivateKeyPem, parseEs256PrivateKey, parseEs256PublicKey } from '../kit/es256-keys.js';
import { loadOrCreateSecret } from '../dev/secrets.js';

// With JWT_ALGORITHM=ES256 access tokens are signed with one P-256 private key and name it by kid;
// GET /.well-known/jwks.json publishes its public half, and the public keys of
// JWT_PREVIOUS_PUBLIC_KEYS beside it, so tokens signed before a rotation verify until they expire.

const PEM_PUBLIC_KEY = /-----BEGIN PUBLIC KEY-----[\s\S]+?-----END PUBLIC KEY-----/g;

/**
 * JWT_PREVIOUS_PUBLIC_KEYS: the JWKS document served before a rotation (`{"keys":[…]}`), one JWK,
 * or one or more PEM public keys. Private keys are refused: this list is published.
 */
export const es256PublicKeys = (): VarSpec<KeyObject[], false> => ({
  parse: (raw, name) => {
    const text = raw.trim();
    const invalid = (why: string) =>
      new ConfigError(name, `must be EC P-256 public keys, as a JWKS ({"keys":[…]}), one JWK without "d", or PEM public keys (${why})`);
    let sources: Array<JsonWebKey | string>;
    if (text.startsWith('{')) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw invalid('not valid JSON');
      }
      const keys = (parsed as { keys?: unknown }).keys;
      sources = Array.isArray(keys) ? (keys as JsonWebKey[]) : [parsed as JsonWebKey];
    } else {
      sources = text.match(PEM_PUBLIC_KEY) ?? [];
      if (/PRIVATE KEY/.test(text)) throw invalid('a private key was given');
    }
    if (sources.length === 0) throw invalid('none found');
    return sources.map((source, i) => {
      try {
        return parseEs256PublicKey(source);
      } catch (err) {
        throw invalid(`key ${i + 1}: ${(err as Error).message}`);
      }
    });
  },
});

export class Es256Keys {
  private constructor(
    readonly privateKey: KeyObject,
    readonly kid: string,
    /** Current key first, then the previous ones; each kid once. */
    private readonly published: JWK[],
    private readonly byKid: Map<string, KeyObject>,
  ) {}

  /** `configured`: JWT_PRIVATE_KEY (validated by the config); else one generated once and kept under DATA_DIR. */
  static async load(configured: string | undefined, previous: KeyObject[], dataDir: string): Promise<Es256Keys> {
    const source = configured ?? (await loadOrCreateSecret(dataDir, 'JWT_PRIVATE_KEY', generateEs256PrivateKeyPem));
    const privateKey = parseEs256PrivateKey(source);
    const current = await es256PublicJwk(privateKey);
    const published: JWK[] = [current];
    const byKid = new Map<string, KeyObject>();
    for (const key of previous) {
      const jwk = await es256PublicJwk(key);
      // The pasted key set may hold the current key too (it was published ahead of the switch).
      if (byKid.has(jwk.kid!) || jwk.kid === current.kid) continue;
      published.push(jwk);
      byKid.set(jwk.kid!, key);
    }
    byKid.set(current.kid!, createPublicKey(privateKey));
    return new Es256Keys(privateKey, current.kid!, published, byKid);
  }

  /** The public key a token's kid names, if it is one of ours. */
  verificationKey(kid: unknown): KeyObject | undefined {
    return typeof kid === 'string' ? this.byKid.get(kid) : undefined;
  }

  /** The public halves only, as copies, so callers cannot alter what is served. */
  jwks(): { keys: JWK[] } {
    return { keys: this.published.map((jwk) => ({ ...jwk, key_ops: ['verify'] })) };
  }
}
