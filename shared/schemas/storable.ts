/**
 * What any request may carry, before its own schema looks at it (REST bodies, path and query, and
 * socket payloads alike). PostgreSQL's text cannot hold the NUL character, so a string with one
 * would fail in the store as a 500 (or a webhook's retry loop) instead of a refusal; and a JSON
 * value nested thousands deep passes a size limit but overflows the stack of whatever serializes
 * it (metadata's own byte count, for one). Both are refused as `invalid_request` here.
 */

/** Deeper than any field of the contract needs (metadata is the only free-form object). */
export const MAX_NESTING = 32;

/**
 * Why the value cannot be taken, or null when it can. Walks without recursion, so a value nested
 * too deep is reported, not a stack overflow.
 */
export function unstorable(value: unknown): string | null {
  const stack: Array<[value: unknown, depth: number]> = [[value, 0]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop()!;
    if (typeof current === 'string') {
      if (current.includes('\u0000')) return 'text may not contain the NUL character (\\u0000)';
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
    if (depth >= MAX_NESTING) return `values may be nested at most ${MAX_NESTING} deep`;
    if (Array.isArray(current)) {
      for (const item of current) stack.push([item, depth + 1]);
      continue;
    }
    for (const [key, item] of Object.entries(current)) {
      if (key.includes('\u0000')) return 'text may not contain the NUL character (\\u0000)';
      stack.push([item, depth + 1]);
    }
  }
  return null;
}
