/**
 * A stopping gateway waits for a catch-up under way for a second at most (gateway/catch-up.ts):
 * one stuck on a struggling store (a statement timeout is 10 s) would hold the stop past the
 * node's 12 s bound, and the API's drain with it.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CATCH_UP_STOP_WAIT_MS } from '../../gateway/catch-up.js';
import { readyAgent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client } from '../helpers/harness.js';
import { waitFor } from '../helpers/processes.js';
import { openSocket, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

describe('a stop during a catch-up', () => {
  let g: GatewayHarness | undefined;
  let socket: TestSocket | undefined;
  afterEach(async () => {
    socket?.close();
    await g?.h.close();
  });

  it('waits for it CATCH_UP_STOP_WAIT_MS at most', async () => {
    g = await createGatewayHarness('pglite');
    const { services, clock } = g.h;
    const t = await seedTenant(services);
    const agent = await readyAgent(client(g.h.app), t);
    socket = openSocket(g.url, agent.widgetToken, ORIGIN);
    await snapshotOf(socket);
    // the store does not answer the catch-up's read of the agent's state (it would, after a statement timeout)
    const reads = vi.spyOn(services.pusher, 'agentState').mockImplementation(() => new Promise(() => {}));
    // the bus reconnected: what was pushed meanwhile may be lost, so the node catches up
    services.bus.publish({ type: 'resync' });
    await waitFor(async () => (reads.mock.calls.length > 0 ? true : undefined), 'the catch-up to read', 10_000);
    let stopped = false;
    const stopping = g.gateway.close().then(() => (stopped = true));
    const ended = socket.next('ended');
    // its sockets are told at once, before the wait
    expect(await ended).toMatchObject({ code: 'server_restarting', final: false });
    await clock.advance(CATCH_UP_STOP_WAIT_MS - 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(stopped).toBe(false);
    await clock.advance(1);
    await stopping;
    expect(stopped).toBe(true);
  });
});
