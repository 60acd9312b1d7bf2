/**
 * Origins (scheme + host + port). Used for allowed-origin lists, SessionRequest.origin and the
 * Origin header checks. A value with a path, query, fragment or credentials is not an origin.
 */

const MEMO_LIMIT = 1000;
const memo = new Map<string, string | null>();

/** Returns the normalized origin, or null when the value is not a bare http(s) origin. */
export function parseOrigin(value: string): string | null {
  // Every widget request parses its Origin header, and a deployment sees few distinct ones.
  const known = memo.get(value);
  if (known !== undefined) return known;
  const parsed = parse(value);
  if (memo.size >= MEMO_LIMIT) memo.clear();
  memo.set(value, parsed);
  return parsed;
}

function parse(value: string): string | null {
  const trimmed = value.trim();
  if (trimmed === '' || trimmed !== value || /\s/.test(value)) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (url.username || url.password || url.search || url.hash) return null;
  // Written as an origin is: the URL parser also reads "http:example.com" and "https:/evil.example" as origins.
  if (value.slice(url.protocol.length, url.protocol.length + 2) !== '//') return null;
  // `new URL('https://a.example/')` has pathname '/', so a trailing slash or any path is refused
  // by comparing against the raw text instead of the parsed pathname.
  // A backslash is a path separator to the URL parser: `https://evil.example\.crm.example` is the
  // origin https://evil.example, which whoever pasted it did not mean.
  const rest = value.slice(url.protocol.length + 2);
  if (rest.includes('/') || rest.includes('\\') || rest.includes('?') || rest.includes('#')) return null;
  return url.origin;
}

export function isOrigin(value: string): boolean {
  return parseOrigin(value) !== null;
}
