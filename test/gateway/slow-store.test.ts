/**
 * The gateway while the store is slow to answer (gateway/cors.ts): clients that hang up in the
 * middle of a request — a WebSocket upgrade, a long-polling handshake, POST or preflight — must not make it
 * write to the dead connection (uWS throws, and unhandled that stops the process); and a
 * long-polling POST whose Origin the REST policy forgot meanwhile (any integration change empties
 * its cache) must keep its body. PGlite runs one statement at a time, so a transaction held open
 * keeps every check waiting.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OriginPolicy } from '../../api/http/origin-policy.js';
import type { Gateway } from '../../gateway/server.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import type { Harness } from '../helpers/harness.js';
import { waitFor } from '../helpers/processes.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

describe('the gateway while the store is slow', () => {
  let live: GatewayHarness;
  let h: Harness;
  let gateway: Gateway;

  beforeAll(async () => {
    live = await createGatewayHarness('pglite');
    ({ h, gateway } = live);
    await seedTenant(h.services);
  });
  afterAll(() => live.close());

  it('survives clients that hang up while the store is busy, and keeps answering', async () => {
    const unhandled: unknown[] = [];
    const note = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', note);
    process.on('uncaughtException', note);
    // an open long-polling session (no Origin: nothing to check)
    const open = await (await fetch(`http://127.0.0.1:${gateway.port}/socket.io/?EIO=4&transport=polling`)).text();
    const sid = (JSON.parse(open.slice(1)) as { sid: string }).sid;
    try {
      // the Origin checks wait until every client has hung up
      const checks = vi.spyOn(OriginPolicy.prototype, 'allows');
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
        // and a preflight, which the gateway answers itself
        hangUp(`OPTIONS /socket.io/?EIO=4&transport=polling HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://preflight-${i}.example\r\nAccess-Control-Request-Method: POST\r\n\r\n`);
      }
      // every preflight is waiting on the store (the others, sent with them, had a moment more)
      await waitFor(async () => (checks.mock.calls.length >= 10 ? true : undefined), 'the Origin checks to wait on the store', 10_000);
      await new Promise((resolve) => setTimeout(resolve, 300));
      release();
      await held;
      await new Promise((resolve) => setTimeout(resolve, 300));
    } finally {
      vi.restoreAllMocks();
      process.off('unhandledRejection', note);
      process.off('uncaughtException', note);
    }
    expect(unhandled).toEqual([]);
    const health = await fetch(`http://127.0.0.1:${gateway.port}/healthz`);
    expect(health.status).toBe(200);
  });

  it('keeps the body of a long-polling POST whose Origin was forgotten by an integration change', async () => {
    const base = `http://127.0.0.1:${gateway.port}/socket.io/?EIO=4&transport=polling`;
    const open = await (await fetch(base, { headers: { origin: ORIGIN } })).text();
    const sid = (JSON.parse(open.slice(1)) as { sid: string }).sid;
    // an integration changed somewhere: the REST policy's answers are dropped
    h.services.bus.publish({ type: 'integration', integrationId: 'c2c_elsewhere' });
    let release!: () => void;
    const held = h.services.db.tx(() => new Promise<void>((resolve) => (release = resolve)));
    const posted = fetch(`${base}&sid=${sid}`, { method: 'POST', headers: { origin: ORIGIN, 'content-type': 'text/plain;charset=UTF-8' }, body: '40' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    release();
    await held;
    const answer = await posted;
    expect(answer.status).toBe(200);
    expect(answer.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(await answer.text()).toBe('ok');
    // the CONNECT packet arrived: the session answers it (here a refusal, as no token was sent)
    const reply = await (await fetch(`${base}&sid=${sid}`, { headers: { origin: ORIGIN } })).text();
    expect(reply).toMatch(/^44/);
  });
});
