// A software WebAuthn authenticator for the tests: real P-256 keys (node:crypto), real
// authenticatorData, clientDataJSON and 'none' attestation objects in CBOR, real ECDSA
// signatures, exactly as a platform authenticator and its browser would send them. Options
// go in as the service answers them (the JSON forms); answers come out as
// PublicKeyCredential.toJSON() gives them.
import { type KeyObject, createHash, createPublicKey, generateKeyPairSync, randomBytes, sign } from 'node:crypto';

type Cbor = number | string | Buffer | Cbor[] | Map<Cbor, Cbor> | { [key: string]: Cbor };

function head(major: number, n: number): Buffer {
  if (n < 24) return Buffer.from([(major << 5) | n]);
  if (n < 0x100) return Buffer.from([(major << 5) | 24, n]);
  if (n < 0x10000) return Buffer.from([(major << 5) | 25, n >> 8, n & 0xff]);
  const b = Buffer.alloc(5);
  b[0] = (major << 5) | 26;
  b.writeUInt32BE(n, 1);
  return b;
}

/** CBOR (RFC 8949) of the few types WebAuthn uses: integers, byte and text strings, arrays, maps. */
export function cbor(value: Cbor): Buffer {
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (typeof value === 'string') {
    const bytes = Buffer.from(value, 'utf8');
    return Buffer.concat([head(3, bytes.length), bytes]);
  }
  if (Buffer.isBuffer(value)) return Buffer.concat([head(2, value.length), value]);
  if (Array.isArray(value)) return Buffer.concat([head(4, value.length), ...value.map(cbor)]);
  const entries = value instanceof Map ? [...value.entries()] : Object.entries(value);
  return Buffer.concat([head(5, entries.length), ...entries.flatMap(([k, v]) => [cbor(k), cbor(v)])]);
}

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest();
const b64url = (data: Buffer) => data.toString('base64url');

const FLAG_UP = 0x01;
const FLAG_UV = 0x04;
const FLAG_AT = 0x40;

export interface SoftCredential {
  id: Buffer;
  key: KeyObject;
  publicKeyCose: Buffer;
  /** The user handle the site gave at registration (base64url). */
  userHandle: string;
  counter: number;
}

/** What a test may bend in one ceremony, to play a phishing page, a replay or a cloned key. */
export interface Tampering {
  origin?: string;
  rpId?: string;
  /** The signature count to report (default: one more than the last). */
  counter?: number;
  /** Whether the user was verified (default true). */
  userVerified?: boolean;
  /** The credential to use (default: the first allowed one held; at creation, a new one). */
  credential?: SoftCredential;
  userHandle?: string | null;
  /** Signs with another key: a signature that does not verify. */
  wrongSignature?: boolean;
}

interface CreationOptions {
  challenge: string;
  rp: { id?: string };
  user: { id: string };
}
interface RequestOptions {
  challenge: string;
  rpId?: string;
  allowCredentials?: { id: string }[];
}

export class SoftAuthenticator {
  readonly credentials: SoftCredential[] = [];

  constructor(private readonly origin: string) {}

  /** navigator.credentials.create: a new discoverable credential for the options' user. */
  create(options: CreationOptions, t: Tampering = {}) {
    // With t.credential: the same credential attested again (an authenticator re-registering it).
    const privateKey = t.credential?.key ?? generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
    const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
    const publicKeyCose = cbor(
      new Map<Cbor, Cbor>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, Buffer.from(jwk.x!, 'base64url')],
        [-3, Buffer.from(jwk.y!, 'base64url')],
      ]),
    );
    const credential: SoftCredential = {
      id: t.credential?.id ?? randomBytes(32),
      key: privateKey,
      publicKeyCose,
      userHandle: options.user.id,
      counter: 0,
    };
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(credential.id.length);
    const authData = Buffer.concat([
      this.authDataHead(t.rpId ?? options.rp.id!, FLAG_UP | (t.userVerified === false ? 0 : FLAG_UV) | FLAG_AT, 0),
      Buffer.alloc(16),
      idLength,
      credential.id,
      publicKeyCose,
    ]);
    const clientDataJSON = this.clientData('webauthn.create', options.challenge, t.origin);
    const attestationObject = cbor({ fmt: 'none', attStmt: new Map(), authData });
    this.credentials.push(credential);
    return {
      credential,
      json: {
        id: b64url(credential.id),
        rawId: b64url(credential.id),
        type: 'public-key' as const,
        response: { clientDataJSON: b64url(clientDataJSON), attestationObject: b64url(attestationObject), transports: ['internal'] },
        authenticatorAttachment: 'platform' as const,
        clientExtensionResults: {},
      },
    };
  }

  /** navigator.credentials.get: an assertion by the first allowed credential held (any, when none is listed). */
  get(options: RequestOptions, t: Tampering = {}) {
    const allowed = options.allowCredentials?.map((c) => c.id) ?? [];
    const credential =
      t.credential ?? this.credentials.find((c) => allowed.length === 0 || allowed.includes(b64url(c.id))) ?? this.credentials[0];
    if (!credential) throw new Error('the authenticator holds no credential');
    const counter = t.counter ?? credential.counter + 1;
    credential.counter = Math.max(credential.counter, counter);
    const authData = this.authDataHead(t.rpId ?? options.rpId!, FLAG_UP | (t.userVerified === false ? 0 : FLAG_UV), counter);
    const clientDataJSON = this.clientData('webauthn.get', options.challenge, t.origin);
    const signed = Buffer.concat([authData, sha256(clientDataJSON)]);
    const key = t.wrongSignature ? generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey : credential.key;
    const userHandle = t.userHandle === undefined ? credential.userHandle : t.userHandle;
    return {
      id: b64url(credential.id),
      rawId: b64url(credential.id),
      type: 'public-key' as const,
      response: {
        clientDataJSON: b64url(clientDataJSON),
        authenticatorData: b64url(authData),
        signature: b64url(sign('sha256', signed, key)),
        ...(userHandle === null ? {} : { userHandle }),
      },
      authenticatorAttachment: 'platform' as const,
      clientExtensionResults: {},
    };
  }

  private authDataHead(rpId: string, flags: number, counter: number): Buffer {
    const count = Buffer.alloc(4);
    count.writeUInt32BE(counter);
    return Buffer.concat([sha256(rpId), Buffer.from([flags]), count]);
  }

  private clientData(type: string, challenge: string, origin?: string): Buffer {
    return Buffer.from(JSON.stringify({ type, challenge, origin: origin ?? this.origin, crossOrigin: false }));
  }
}
