/**
 * Which proxies are trusted to name the client (TRUST_PROXY), and the client's address that
 * follows: the key of the per-IP rate limits, on REST (fastify's request.ip) and on the gateway's
 * sockets alike. One trust function, compiled once per configuration, serves both, so that a
 * client counts against one limit whichever way it comes in.
 *
 * X-Forwarded-For is read from the right: each trusted hop vouches for the entry to its left, and
 * the first address not trusted is the client. Entries further left were written by the client
 * itself and are never believed. Trusting every hop (`true`) takes the leftmost entry, which a
 * client can set to anything unless the proxy in front overwrites the header.
 */
import proxyAddr from '@fastify/proxy-addr';

/** false: no proxy; true: every hop; else the proxies' addresses, CIDR ranges or proxy-addr's names (loopback, linklocal, uniquelocal). */
export type TrustProxy = boolean | string[];

export type Trust = (address: string, hop: number) => boolean;

const TRUST_ALL: Trust = () => true;
const compiled = new WeakMap<string[], Trust>();

/** The trust function of a setting (false: none). A list is compiled once; it throws on an entry that is not an address, range or name. */
export function trustOf(setting: TrustProxy): Trust | false {
  if (setting === false) return false;
  if (setting === true) return TRUST_ALL;
  let trust = compiled.get(setting);
  if (!trust) compiled.set(setting, (trust = proxyAddr.compile(setting)));
  return trust;
}

/**
 * The client's address: the connection's (`remote`, as Node writes it) unless it is a trusted
 * proxy, then walking X-Forwarded-For from the right past the trusted hops, as fastify does.
 */
export function clientAddressOf(setting: TrustProxy, remote: string, forwardedFor: string | undefined): string {
  const trust = trustOf(setting);
  if (!trust || !forwardedFor) return remote;
  // proxy-addr reads the two fields an IncomingMessage has for this
  const addresses = proxyAddr.all({ socket: { remoteAddress: remote }, headers: { 'x-forwarded-for': forwardedFor } } as never, trust);
  return addresses[addresses.length - 1]!;
}
