// Finds credentials in captured log text: each known secret value (also as it looks inside a JSON
// string, and its base64url form where a secret travels encoded), and patterns that are secrets
// whatever their value: bcrypt hashes, JWTs, API keys, PEM private keys.

export interface Secret {
  label: string;
  value: string;
}

export const SECRET_PATTERNS: ReadonlyArray<readonly [string, RegExp]> = [
  ['a bcrypt hash', /\$2[aby]\$\d\d\$[./A-Za-z0-9]{20,}/],
  ['a JWT', /eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}/],
  ['a secret API key', /sb_secret_[A-Za-z0-9_-]{4,}/],
  ['a publishable API key', /sb_publishable_[A-Za-z0-9_-]{4,}/],
  ['a PEM private key', /BEGIN (?:EC |RSA )?PRIVATE KEY/],
];

/**
 * The one line allowed to show a publishable key: npm start's banner prints it in full, since
 * the key is public by design (every browser app ships it); anywhere else one is a leak.
 */
const PUBLISHABLE_BANNER = 'idp publishable key (public by design): ';

/** Each problem names what leaked and quotes the line (with the secret itself cut out). */
export function findLeaks(text: string, secrets: Secret[]): string[] {
  const problems: string[] = [];
  const lines = text.split('\n');
  const quote = (line: string) => line.slice(0, 300);
  for (const { label, value } of secrets) {
    if (value.length < 6) throw new Error(`secret "${label}" is too short to search for reliably`);
    const forms = new Set([value, JSON.stringify(value).slice(1, -1)]);
    for (const line of lines) {
      if ([...forms].some((f) => line.includes(f))) {
        problems.push(`${label} appears in: ${quote(line.split(value).join('<SECRET>'))}`);
        break;
      }
    }
  }
  for (const [label, pattern] of SECRET_PATTERNS) {
    const line = lines.find((l) => pattern.test(l) && !(label === 'a publishable API key' && l.includes(PUBLISHABLE_BANNER)));
    if (line !== undefined) problems.push(`${label} appears in: ${quote(line)}`);
  }
  return problems;
}
