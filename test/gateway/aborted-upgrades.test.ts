/**
 * Clients that hang up in the middle of a request — a WebSocket upgrade, a long-polling handshake —
 * while the store is slow to answer: the gateway must not write to the dead connection (uWS
 * throws, and unhandled that stops the process) and must go on serving everyone else.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../gateway/server.js';
import { createHarness, type Harness } from '../helpers/harness.js';

describe('the gateway and aborted upgrades', () => {
  let h: Harness;
  let gateway: Gateway;

  beforeAll(async () => {
    h = await createHarness('pglite');
    gateway = await startGateway(h.services, { port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await gateway.close();
    await h.close();
  });

  it('survives clients that hang up while the store is busy, and keeps answering', async () => {
    const unhandled: unknown[] = [];
    const note = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', note);
    process.on('uncaughtException', note);
    // an open long-polling session (no Origin: nothing to check)
    const open = await (await fetch(`http://127.0.0.1:${gateway.port}/socket.io/?EIO=4&transport=polling`)).text();
    const sid = (JSON.parse(open.slice(1)) as { sid: string }).sid;
    try {
      // PGlite runs one statement at a time: a transaction held open keeps the Origin checks waiting
      // until every client has hung up
      let release!: () => void;
      const held = h.services.db.tx(() => new Promise<void>((resolve) => (release = resolve)));
      const hangUp = (request: string) => {
        const socket = connect(gateway.port, '127.0.0.1');
        socket.on('error', () => {});
        socket.write(request, () => socket.destroy());
      };
      for (let i = 0; i < 10; i += 1) {
        hangUp(
          'GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
            `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: https://stranger-${i}.example\r\n\r\n`,
        );
        // long-polling, whose Origin CORS checks against the store: a handshake engine.io refuses
        // (Engine.IO 3), and a POST to an open session with no body
        hangUp(`GET /socket.io/?EIO=3&transport=polling HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://poller-${i}.example\r\n\r\n`);
        hangUp(`POST /socket.io/?EIO=4&transport=polling&sid=${sid} HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://poster-${i}.example\r\nContent-Length: 0\r\n\r\n`);
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      release();
      await held;
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      process.off('unhandledRejection', note);
      process.off('uncaughtException', note);
    }
    expect(unhandled).toEqual([]);
    const health = await fetch(`http://127.0.0.1:${gateway.port}/healthz`);
    expect(health.status).toBe(200);
  });
});
