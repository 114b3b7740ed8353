// Strings that JavaScript holds but that are not text anywhere else.

// A surrogate half without its partner: encoders turn it into U+FFFD, so the
// string stored or hashed is not the one received.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/** PostgreSQL's text and jsonb hold neither U+0000 nor an unpaired surrogate (the insert fails). */
export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && !hasLoneSurrogate(text);
}

/** Text made safe inside HTML element content and quoted attribute values (the five special characters). */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
