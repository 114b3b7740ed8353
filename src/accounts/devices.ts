import UAParser from 'ua-parser-js';

/**
 * A session's browser in words, as people name it ("Chrome on Linux",
 * "Safari on iOS"), read from its User-Agent by ua-parser-js; null when the
 * agent names no browser it knows (a script, a command-line client).
 */
export function deviceName(userAgent: string | null): string | null {
  if (!userAgent) return null;
  const parsed = new UAParser(userAgent);
  const browser = parsed.getBrowser().name;
  const os = parsed.getOS().name;
  if (!browser) return null;
  return os ? `${browser} on ${os}` : browser;
}
