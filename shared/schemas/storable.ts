/**
 * What any request may carry, before its own schema looks at it (REST bodies, path and query, and
 * socket payloads alike). Each of these is refused, as `invalid_request` (in a path parameter it
 * names nothing: `not_found`, api/http/inputs.ts):
 * - the NUL character: PostgreSQL's text cannot hold it, so it would fail in the store as a 500
 *   (or a webhook's retry loop) instead of a refusal;
 * - half of a UTF-16 surrogate pair (a lone `\ud800`: valid JSON, not Unicode text): jsonb refuses
 *   it (a 500 again), and a text column quietly stores U+FFFD in its place, so the row no longer
 *   matches the key it was written under (a command's request_id, then taken for a replay of
 *   another command and never run);
 * - a JSON value nested thousands deep: it passes a size limit but overflows the stack of whatever
 *   serializes it (metadata's own byte count, for one);
 * - binary data (a socket event may carry attachments): no field of the contract is binary, and
 *   walked as an object, each byte an entry, 640 KB of it held a node's event loop for half a second;
 * - a number JSON can write but not hold (1e400 parses as Infinity, which is stored and compared as
 *   null: a replay with another body was taken for the same request), or one past ±(2^53 − 1),
 *   which a double holds only rounded (a CRM's 20-digit id was stored changed, and a replay with
 *   the id's next value was taken for the same request);
 * - a key named `__proto__`, or a `constructor` holding a `prototype`: whatever copies the value
 *   key by key would set an object's prototype instead of a field (fastify's own parser refused
 *   them too, but as "not valid JSON").
 */

/** Deeper than any field of the contract needs (metadata is the only free-form object). */
export const MAX_NESTING = 32;

/** A surrogate code unit not paired with its other half (in `u` mode a pair is one code point). */
const LONE_SURROGATE = /\p{Cs}/u;

function unstorableText(text: string): string | null {
  if (text.includes('\u0000')) return 'text may not contain the NUL character (\\u0000)';
  if (LONE_SURROGATE.test(text)) return 'text must be well-formed Unicode (no unpaired surrogate such as \\ud800)';
  return null;
}

/**
 * Why the value cannot be taken, or null when it can. Walks without recursion, so a value nested
 * too deep is reported, not a stack overflow.
 */
export function unstorable(value: unknown): string | null {
  const stack: Array<[value: unknown, depth: number]> = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current === 'string') {
      const why = unstorableText(current);
      if (why) return why;
      continue;
    }
    if (typeof current === 'number' && !Number.isFinite(current)) return 'numbers must be finite (one was too large to hold)';
    if (typeof current === 'number' && Math.abs(current) > Number.MAX_SAFE_INTEGER) {
      return 'numbers must lie within ±9007199254740991 to be held exactly; send larger values (identifiers above all) as strings';
    }
    if (current === null || typeof current !== 'object') continue;
    if (ArrayBuffer.isView(current) || current instanceof ArrayBuffer) return 'binary data is not accepted';
    if (depth >= MAX_NESTING) return `values may be nested at most ${MAX_NESTING} deep`;
    if (Array.isArray(current)) {
      for (const item of current) stack.push([item, depth + 1]);
      continue;
    }
    for (const [key, item] of Object.entries(current)) {
      const why = unstorableText(key);
      if (why) return why;
      if (key === '__proto__') return 'a key may not be named __proto__';
      if (key === 'constructor' && item !== null && typeof item === 'object' && Object.hasOwn(item, 'prototype')) return 'a constructor key may not hold a prototype key';
      stack.push([item, depth + 1]);
    }
  }
  return null;
}
