/**
 * If-None-Match as RFC 9110 (section 13.1.2) reads it: weak comparison (a proxy that compresses a
 * response, nginx with gzip for one, hands the client `W/"…"` for our strong tag), any tag of a
 * list, and `*` for any current representation. Our tags never hold a comma, so splitting on
 * commas cannot cut one of ours.
 */
const opaque = (tag: string) => tag.trim().replace(/^W\//, '');

export function noneMatch(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  if (header.trim() === '*') return true;
  const ours = opaque(etag);
  return header.split(',').some((tag) => opaque(tag) === ours);
}
