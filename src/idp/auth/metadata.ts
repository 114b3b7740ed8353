import { isStorableText } from '../../kit/text.js';
import { authErrors } from './errors.js';

// Limits on user and app metadata. Both travel inside every access token (claims `user_metadata`
// and `app_metadata`), so their size is the token's size: 900 KB of sign-up `data` made a 1.2 MB
// token that no HTTP server takes in a header (Node's default limit for all headers together is
// 16 KiB). GoTrue itself sets no limit (supabase/auth#1776 is that problem, still open); these are
// this idp's own. With both at the maximum a token stays under 12 KB, which leaves room in those
// 16 KiB for the other headers of a request (apikey, cookies, …).

/** Bytes of each metadata object, as UTF-8 JSON. */
export const MAX_METADATA_BYTES = 4096;
/** Levels of nested objects and arrays, the metadata object itself being the first. */
export const MAX_METADATA_DEPTH = 10;

/** How deeply `value` nests objects and arrays (0 for a scalar), walked without recursion. */
function nestingDepth(value: unknown): number {
  let deepest = 0;
  const pending: Array<{ item: unknown; depth: number }> = [{ item: value, depth: 0 }];
  while (pending.length > 0) {
    const { item, depth } = pending.pop()!;
    if (typeof item !== 'object' || item === null) continue;
    const here = depth + 1;
    if (here > deepest) deepest = here;
    // Past the limit the exact depth no longer matters.
    if (here > MAX_METADATA_DEPTH) return here;
    for (const inner of Object.values(item)) pending.push({ item: inner, depth: here });
  }
  return deepest;
}

/** Refuses metadata over the limits with 400 validation_failed, naming the field as the client sent it. */
export function checkMetadataLimits(field: string, value: Record<string, unknown> | undefined): void {
  if (value === undefined) return;
  if (nestingDepth(value) > MAX_METADATA_DEPTH) {
    throw authErrors.validation(`${field} must not nest objects or arrays more than ${MAX_METADATA_DEPTH} levels deep`);
  }
  const bytes = Buffer.byteLength(JSON.stringify(value), 'utf8');
  if (bytes > MAX_METADATA_BYTES) {
    throw authErrors.validation(`${field} must be at most ${MAX_METADATA_BYTES} bytes as JSON (got ${bytes})`);
  }
}

/**
 * Metadata PostgreSQL cannot store is the caller's error: a 400 instead of a 500. jsonb holds
 * neither U+0000 (22P05) nor an unpaired surrogate (22P02) in any string or key.
 */
export function checkStorableMetadata(field: string, value: unknown): void {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') {
      if (!isStorableText(item)) throw authErrors.validation(`${field} cannot contain U+0000 or unpaired surrogates`);
    } else if (typeof item === 'object' && item !== null) {
      for (const [key, inner] of Object.entries(item)) pending.push(key, inner);
    }
  }
}
