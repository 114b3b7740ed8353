import { formatWait } from '/assets/api.js';

// The API's refusals of a link (create, bulk item, change) in words for a
// person, with the field each is about: `url`, `alias`, `title`, `tags`,
// `expires_at` or `max_visits` (none when it is about the request as a whole).
// The API's messages name the field first ("body/url …", "alias …"), which is
// what is matched here; its own text is never shown.

export const TAGS_WORDS = 'Tags are at most 10 words of 1 to 32 letters a-z, digits, _ and -, each starting with a letter or digit.';
export const ALIAS_WORDS = 'A back-half is 3 to 64 letters, digits, _ and -, with no spaces or dots.';

/** `{ field, text }` for an API refusal with this status and message (an ApiError, or a bulk item's result). */
export function linkRefusal({ status, message = '', retryAfter }) {
  const m = message;
  if (status === 0) return { text: m };
  if (status === 401) return { text: 'This API key is not accepted (revoked, or mistyped). Enter a key again.' };
  if (status === 403) return { text: 'This API key does not manage this link.' };
  if (status === 404) return { text: 'This link no longer exists. Search again to refresh the list.' };
  if (status === 429) {
    const seconds = retryAfter ?? Number(/(\d+) seconds?/.exec(m)?.[1]);
    const wait = Number.isFinite(seconds) && seconds > 0 ? ` Try again in ${formatWait(seconds)}.` : ' Try again later.';
    return /API key may create/.test(m)
      ? { text: `This API key has created as many links as it may this hour.${wait}` }
      : { text: `Too many links created from this address this minute.${wait}` };
  }
  if (/link of this shortener already/.test(m))
    return { field: 'url', text: 'This is already a short link of this service. Use the address it leads to instead.' };
  if (/protocol .* is not allowed/.test(m))
    return { field: 'url', text: 'Only web addresses can be shortened: they start with http:// or https://.' };
  if (/url must NOT have more than/.test(m)) return { field: 'url', text: 'This address is longer than 2,048 characters.' };
  if (/credentials/.test(m)) return { field: 'url', text: 'The address holds a user name or password before the host. Remove it.' };
  if (/tabs or line breaks/.test(m)) return { field: 'url', text: 'The address holds a tab or a line break. Remove it.' };
  if (/backslash/.test(m)) return { field: 'url', text: 'The address holds a backslash (\\) before its query. Use / instead.' };
  if (/url host must be written/.test(m)) return { field: 'url', text: 'Write the host of the address plainly, for example example.com.' };
  if (/^(body\/)?url\b/.test(m)) return { field: 'url', text: 'This is not a web address, for example https://example.com/page.' };
  if (/alias .* is taken/.test(m))
    return { field: 'alias', text: 'This back-half is taken (or was used by a deleted link). Choose another one.' };
  if (/alias .* is reserved/.test(m)) return { field: 'alias', text: 'This back-half names a page of this service. Choose another one.' };
  if (/^(body\/)?alias\b/.test(m)) return { field: 'alias', text: ALIAS_WORDS };
  if (/^(body\/)?title\b/.test(m)) return { field: 'title', text: 'A title is at most 200 characters.' };
  if (/^(body\/)?tags\b/.test(m)) return { field: 'tags', text: TAGS_WORDS };
  if (/expires_at must be in the future/.test(m)) return { field: 'expires_at', text: 'Choose an expiry time in the future.' };
  if (/expires_at/.test(m)) return { field: 'expires_at', text: 'The expiry is not a valid date and time.' };
  if (/max_visits/.test(m)) return { field: 'max_visits', text: 'Maximum visits must be a whole number from 1, or empty.' };
  if (status === 503 && /not configured/.test(m)) return { text: 'The link API is off on this service.' };
  if (status >= 500) return { text: 'The service could not answer just now. Try again in a moment.' };
  return { text: 'The service refused this. Check the values and try again.' };
}

/**
 * Tags as typed: separated by spaces, commas, "|" or ";" (none of which a tag
 * may hold), lower-cased as the API stores them. The API checks each.
 */
export const splitTags = (text) =>
  text
    .split(/[\s,|;]+/)
    .map((t) => t.toLowerCase())
    .filter((t) => t !== '');
