/**
 * The address a socket's commands are rate-limited by (gateway/handshake.ts): the one REST's
 * request.ip gives for the same client, so that both count against one per-IP limit.
 */
import type { Socket } from 'socket.io';
import { describe, expect, it } from 'vitest';
import type { Services } from '../../api/services.js';
import { clientAddress } from '../../gateway/handshake.js';

// clientAddress reads nothing but the trust setting and the handshake's headers and address.
const behind = (trustProxy: boolean) => ({ config: { trustProxy } }) as Services;
const socket = (address: string, forwardedFor?: string | string[]) =>
  ({ handshake: { address, headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor } } }) as unknown as Socket;

describe("a socket's client address", () => {
  it('behind a trusted proxy is the first non-empty X-Forwarded-For entry', () => {
    expect(clientAddress(behind(true), socket('10.0.0.2', '198.51.100.7, 10.0.0.1'))).toBe('198.51.100.7');
    expect(clientAddress(behind(true), socket('10.0.0.2', ' , 198.51.100.8 ,10.0.0.1'))).toBe('198.51.100.8');
    expect(clientAddress(behind(true), socket('10.0.0.2', ['198.51.100.9', '10.0.0.1']))).toBe('198.51.100.9');
    expect(clientAddress(behind(true), socket('10.0.0.2', ''))).toBe('10.0.0.2');
  });

  it("without a trusted proxy is the connection's, whatever the headers say", () => {
    expect(clientAddress(behind(false), socket('203.0.113.5', '198.51.100.7'))).toBe('203.0.113.5');
  });

  it('is written as Node writes it, not in the full form uWS gives on a dual-stack listener', () => {
    expect(clientAddress(behind(false), socket('0000:0000:0000:0000:0000:ffff:7f00:0001'))).toBe('::ffff:127.0.0.1');
    expect(clientAddress(behind(false), socket('2001:0db8:0000:0000:0000:0000:0000:0001'))).toBe('2001:db8::1');
    expect(clientAddress(behind(false), socket('0000:0000:0000:0000:0000:0000:0000:0001'))).toBe('::1');
  });
});
