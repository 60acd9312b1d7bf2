/**
 * The counter keys of the rate limits (spec section 8, and those decided in shared/limits.ts), one
 * per limit and subject. REST (api/http/rate-limits.ts) and the gateway's sockets
 * (gateway/limits.ts) count through these, so a client's requests on both count in one window.
 */

/**
 * A client address as the per-address limits count it: an IPv6 address by its /64, a subscriber's
 * usual allocation (whoever holds one can rotate through 2^64 addresses, each with a fresh budget,
 * and each a key in the counter), an IPv4 address (IPv4-mapped included) as it is.
 */
export function addressKey(ip: string): string {
  // every REST request counts by this: the plain IPv4 address, the usual case, costs no parsing
  if (!ip.includes(':')) return ip;
  // a port some proxies leave on their X-Forwarded-For entries (1.2.3.4:5678, [2001:db8::1]:443) is not the client's
  const bare = /^\[([^\]]+)\](?::\d+)?$/.exec(ip)?.[1] ?? /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(ip)?.[1] ?? ip;
  const address = bare.split('%')[0]!.toLowerCase();
  if (!address.includes(':')) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  const prefix = groups.slice(0, 4).map((group) => (Number.parseInt(group, 16) || 0).toString(16));
  return `${prefix.join(':')}::/64`;
}

export const RATE_KEYS = {
  serverKeyPerIp: (ip: string) => `sk-ip:${addressKey(ip)}`,
  serverKeyPerIntegration: (integrationId: string) => `sk-int:${integrationId}`,
  widgetPerIp: (ip: string) => `w-ip:${addressKey(ip)}`,
  enginePerEngine: (engineId: string) => `eng:${engineId}`,
  /** an engine's acks over its socket (on REST they ride its heartbeats) */
  engineAcks: (engineId: string) => `eng-ack:${engineId}`,
  refusedCredentialsPerIp: (ip: string) => `refused-ip:${addressKey(ip)}`,
} as const;
