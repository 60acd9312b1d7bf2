/**
 * The node-local socket index that endings use (gateway/local-sockets.ts): a key held by one socket
 * maps to it directly, by a few to an array, by many to a set; in every case every socket that holds
 * a key is found, and none that left.
 */
import type { Socket } from 'socket.io';
import { describe, expect, it } from 'vitest';
import type { SocketData } from '../../gateway/handshake.js';
import { LocalSockets, type SocketKey } from '../../gateway/local-sockets.js';

// The index reads nothing of a socket but its data.
const widget = (sessionId: string, memberId: string, token = 't') =>
  ({ data: { kind: 'widget', token, origin: 'https://crm.example.com', ip: '203.0.113.7', sessionId, integrationId: 'int_1', memberId, expiresAt: 0 } satisfies SocketData }) as unknown as Socket;
const engine = (engineId: string, memberId: string) =>
  ({ data: { kind: 'engine', token: 't', engineId, integrationId: 'int_1', memberId } satisfies SocketData }) as unknown as Socket;

describe('the node-local socket index', () => {
  it('finds every socket holding a key, as sockets come and go', () => {
    const local = new LocalSockets();
    // two widgets of one session (two tabs), told apart by their tokens
    const [first, second] = [widget('ses_1', 'mem_1', 'tab-1'), widget('ses_1', 'mem_1', 'tab-2')];
    const window = engine('eng_1', 'mem_1');
    const other = widget('ses_2', 'mem_2');
    for (const socket of [first, second, window, other]) local.add(socket);

    expect(local.get('session:ses_1')).toEqual([first, second]);
    expect(local.get('member:mem_1')).toEqual([first, second, window]);
    expect(local.get('engine:eng_1')).toEqual([window]);
    expect(local.get('integration:int_1')).toHaveLength(4);

    local.remove(first);
    expect(local.get('session:ses_1')).toEqual([second]);
    local.remove(second);
    expect(local.get('session:ses_1')).toEqual([]);
    expect(local.get('member:mem_1')).toEqual([window]);

    // a key back to one socket still takes a second one
    local.add(first);
    expect(local.get('member:mem_1')).toEqual([window, first]);
    local.remove(window);
    local.remove(first);
    local.remove(other);
    expect(local.get('member:mem_1')).toEqual([]);
    expect(local.get('integration:int_1')).toEqual([]);
  });

  it('ignores a socket added twice or removed twice', () => {
    const local = new LocalSockets();
    const socket = engine('eng_1', 'mem_1');
    local.add(socket);
    local.add(socket);
    expect(local.get('engine:eng_1')).toEqual([socket]);
    local.remove(socket);
    local.remove(socket);
    expect(local.get('engine:eng_1')).toEqual([]);
  });

  it('finds the same sockets as a plain map of sets through many comings and goings, across the sizes the index holds them in', () => {
    const local = new LocalSockets();
    const reference = new Map<string, Set<Socket>>();
    const keys = (socket: Socket) => {
      const data = socket.data as SocketData;
      return [data.kind === 'widget' ? `session:${data.sessionId}` : `engine:${data.engineId}`, `integration:${data.integrationId}`, `member:${data.memberId}`];
    };
    // up to 30 sockets of 3 members (a member's widgets and window share its key): keys pass from
    // one socket to a few to many and back, many times
    const sockets = Array.from({ length: 30 }, (_, i) => (i % 5 === 0 ? engine(`eng_${i}`, `mem_${i % 3}`) : widget(`ses_${i % 7}`, `mem_${i % 3}`, `tab-${i}`)));
    let seed = 7;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    const connected = new Set<Socket>();
    for (let step = 0; step < 3000; step += 1) {
      const socket = sockets[Math.floor(random() * sockets.length)]!;
      // connecting is likelier while few are connected, leaving while many are
      if (random() * sockets.length > connected.size) {
        local.add(socket);
        connected.add(socket);
        for (const key of keys(socket)) reference.set(key, (reference.get(key) ?? new Set()).add(socket));
      } else {
        local.remove(socket);
        connected.delete(socket);
        for (const key of keys(socket)) reference.get(key)?.delete(socket);
      }
      for (const [key, held] of reference) {
        expect(new Set(local.get(key as SocketKey))).toEqual(held);
        expect(local.get(key as SocketKey)).toHaveLength(held.size);
      }
    }
  });

  it('gives a copy, so ending sockets while going through it is safe', () => {
    const local = new LocalSockets();
    const sockets = [widget('ses_1', 'mem_1'), widget('ses_2', 'mem_1')];
    for (const socket of sockets) local.add(socket);
    const found = local.get('member:mem_1');
    for (const socket of found) local.remove(socket);
    expect(found).toEqual(sockets);
  });
});
