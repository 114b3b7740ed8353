// Reading JSON request bodies: one parser for every service, with errors that
// say what is actually wrong with the body.

/** A request body that is not acceptable JSON; each API reports it in its own envelope. */
export class InvalidJsonBody extends Error {
  readonly statusCode = 400;
  constructor(message: string) {
    super(message);
    this.name = 'InvalidJsonBody';
  }
}

/**
 * How deeply a body may nest objects and arrays. JSON.parse copes with any depth, but what is done
 * with the value afterwards is recursive: JSON.stringify overflowed the stack on 10,000 levels (a
 * 500 on REST inserts and sign-up metadata), and PostgreSQL's JSON parser has a stack limit too. Real bodies nest a
 * few levels; Go's encoding/json, which GoTrue uses, also stops at a fixed depth.
 */
export const MAX_JSON_DEPTH = 1000;

/** Whether the JSON text opens more than `max` nested objects/arrays, counted without parsing (no recursion). */
export function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}

// Keys that pollute prototypes once a body is merged into another object: refused, as Fastify's own
// parser does, but with a message that names them (Fastify calls such a body "not valid JSON").
const MAYBE_POLLUTING = /"(?:__proto__|constructor)"/;

/** The first `__proto__` key, or `constructor` key holding a `prototype`, anywhere in the value (iterative). */
function pollutingKey(value: unknown): string | undefined {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    for (const key of Object.keys(node)) {
      const child = (node as Record<string, unknown>)[key];
      if (key === '__proto__') return '__proto__';
      if (key === 'constructor' && child !== null && typeof child === 'object' && Object.hasOwn(child, 'prototype'))
        return 'constructor.prototype';
      stack.push(child);
    }
  }
  return undefined;
}

/** Parses a JSON request body, or throws InvalidJsonBody saying what is wrong with it. */
export function parseJsonBody(text: string): unknown {
  if (text.trim() === '') throw new InvalidJsonBody("Body cannot be empty when content-type is set to 'application/json'");
  if (nestsDeeperThan(text, MAX_JSON_DEPTH)) throw new InvalidJsonBody(`Body nests deeper than ${MAX_JSON_DEPTH} levels`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new InvalidJsonBody(`Body is not valid JSON: ${(err as Error).message}`);
  }
  const key = MAYBE_POLLUTING.test(text) ? pollutingKey(value) : undefined;
  if (key) throw new InvalidJsonBody(`Body must not contain the key "${key}"`);
  return value;
}
