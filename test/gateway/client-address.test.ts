/**
 * The address a socket's commands are rate-limited by (gateway/handshake.ts) is the one REST's
 * request.ip gives for the same client (api/http/client-address.ts), so that both count against
 * one per-IP limit; and behind listed proxies, entries a client wrote itself are not believed.
 */
import Fastify from 'fastify';
import type { Socket } from 'socket.io';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../api/config.js';
import { trustOf, type TrustProxy } from '../../api/http/client-address.js';
import type { Services } from '../../api/services.js';
import { clientAddress } from '../../gateway/handshake.js';

// clientAddress reads nothing but the trust setting and the handshake's headers and address.
const behind = (trustProxy: TrustProxy) => ({ config: { trustProxy } }) as Services;
const socket = (address: string, forwardedFor?: string | string[]) =>
  ({ handshake: { address, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } } }) as unknown as Socket;

/** REST's answer: request.ip of a fastify built the way api/app.ts builds it. */
const apps: Array<ReturnType<typeof Fastify>> = [];
async function restAddress(setting: TrustProxy, remoteAddress: string, forwardedFor?: string | string[]): Promise<string> {
  const app = Fastify({ trustProxy: trustOf(setting) });
  apps.push(app);
  app.get('/', async (request) => request.ip);
  const headers = forwardedFor === undefined ? {} : { 'x-forwarded-for': Array.isArray(forwardedFor) ? forwardedFor.join(', ') : forwardedFor };
  return (await app.inject({ url: '/', remoteAddress, headers })).body;
}
afterAll(async () => Promise.all(apps.map((app) => app.close())));

const PROXIES = ['10.0.0.0/8'];
// [what, trust setting, connection address as uWS gives it, as Node gives it, X-Forwarded-For, the client]
const CASES: Array<[string, TrustProxy, string, string, string | string[] | undefined, string]> = [
  ['no proxy trusted: the connection, whatever the headers say', false, '203.0.113.5', '203.0.113.5', '198.51.100.7', '203.0.113.5'],
  ['every hop trusted: the leftmost entry', true, '10.0.0.2', '10.0.0.2', '198.51.100.7, 10.0.0.1', '198.51.100.7'],
  ['every hop trusted, header repeated (Node joins the lines)', true, '10.0.0.2', '10.0.0.2', ['198.51.100.9', '10.0.0.1'], '198.51.100.9'],
  ['every hop trusted: empty entries are skipped', true, '10.0.0.2', '10.0.0.2', ' , 198.51.100.8 ,10.0.0.1', '198.51.100.8'],
  ['every hop trusted, an empty header: the connection', true, '10.0.0.2', '10.0.0.2', '', '10.0.0.2'],
  ['listed proxies: the entry the last of them vouches for, not what the client wrote left of it', PROXIES, '10.0.0.2', '10.0.0.2', '6.6.6.6, 198.51.100.7, 10.0.0.1', '198.51.100.7'],
  ['listed proxies: a client posing as a proxy is the client', PROXIES, '203.0.113.5', '203.0.113.5', '198.51.100.7', '203.0.113.5'],
  ['listed proxies: no header, the proxy itself', PROXIES, '10.0.0.2', '10.0.0.2', undefined, '10.0.0.2'],
  ['a named range over an IPv4-mapped connection (a dual-stack listener)', ['loopback'], '0000:0000:0000:0000:0000:ffff:7f00:0001', '::ffff:127.0.0.1', '198.51.100.9', '198.51.100.9'],
  ['IPv6 written as Node writes it, not in the full form uWS gives', false, '2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1', undefined, '2001:db8::1'],
  ['the IPv6 loopback', false, '0000:0000:0000:0000:0000:0000:0000:0001', '::1', undefined, '::1'],
  ['IPv4-mapped, untrusted', false, '0000:0000:0000:0000:0000:ffff:7f00:0001', '::ffff:127.0.0.1', '198.51.100.9', '::ffff:127.0.0.1'],
];

describe("a socket's client address is REST's", () => {
  it.each(CASES)('%s', async (_what, setting, uwsAddress, nodeAddress, forwardedFor, client) => {
    expect(clientAddress(behind(setting), socket(uwsAddress, forwardedFor))).toBe(client);
    expect(await restAddress(setting, nodeAddress, forwardedFor)).toBe(client);
  });
});

describe('TRUST_PROXY', () => {
  const trustProxy = (value: string) => loadConfig({ TRUST_PROXY: value }).trustProxy;

  it('is off unless set, on for every hop with true, or a list of proxies', () => {
    expect(loadConfig({}).trustProxy).toBe(false);
    expect(trustProxy('0')).toBe(false);
    expect(trustProxy('true')).toBe(true);
    expect(trustProxy('1')).toBe(true);
    expect(trustProxy('10.0.0.0/8, 192.168.1.7,loopback,')).toEqual(['10.0.0.0/8', '192.168.1.7', 'loopback']);
  });

  it('refuses an entry that is no address, range or name, and hop counts, naming the variable', () => {
    expect(() => trustProxy('10.0.0.0/8,proxy.internal')).toThrow(/TRUST_PROXY: invalid IP address: proxy.internal/);
    expect(() => trustProxy('10.0.0.0/33')).toThrow(ConfigError);
    expect(() => trustProxy('2')).toThrow(/TRUST_PROXY: hop counts are not supported/);
  });
});
