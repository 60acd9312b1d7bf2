/**
 * A window whose socket drops and that is not heard from again is offline after
 * LIMITS.engineDropGraceSeconds, not 90 s (gateway/drops.ts, api/domain/engines/dropped.ts); a
 * window that heartbeats after the drop, or holds a call, stays as it is.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIVE_STATUSES } from '../../api/domain/calls/checks.js';
import { LIMITS } from '../../shared/limits.js';
import { storeDrivers } from '../helpers/env.js';
import { heartbeat, readyAgent, requestCall, widgetState, type Agent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client, type Client, type Harness } from '../helpers/harness.js';
import { waitFor } from '../helpers/processes.js';
import { openSocket, type TestSocket } from '../helpers/sockets.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('engine sockets that drop, on %s', (driver) => {
  let live: GatewayHarness;
  let h: Harness;
  let api: Client;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    live = await createGatewayHarness(driver);
    h = live.h;
    api = client(h.app);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await live.close();
  });

  /** A ready window of a new tenant's agent, with its engine socket connected. */
  async function connected(): Promise<{ t: Tenant; agent: Agent; socket: TestSocket }> {
    const t = await seedTenant(h.services);
    const agent = await readyAgent(api, t);
    const socket = openSocket(live.url, agent.engineToken, h.config.siteUrl);
    sockets.push(socket);
    await socket.next('work');
    return { t, agent, socket };
  }

  const held = () => h.services.bus.io.of('/').sockets.size;

  /** Cuts the connection under the socket (no goodbye), as a crash or a lost network does. */
  async function cut(socket: TestSocket): Promise<void> {
    const before = held();
    const gone = socket.next('disconnect');
    socket.socket.io.engine.close();
    await gone;
    await waitFor(async () => (held() < before ? true : undefined), 'the gateway to see the drop');
  }

  const engineState = async (agent: Agent) => (await widgetState(api, agent.widgetToken)).body.engine.state;

  it('marks a window offline once it has said nothing for the grace after its socket dropped', async () => {
    const { t, agent, socket } = await connected();
    await cut(socket);
    await h.clock.advanceSeconds(LIMITS.engineDropGraceSeconds - 1);
    expect(await engineState(agent)).toBe('ready');
    await h.clock.advanceSeconds(1);
    expect(await engineState(agent)).toBe('offline');
    const call = await requestCall(api, t);
    expect(call.status).toBe(409);
    expect(call.body).toMatchObject({ ok: false, error: 'agent_offline' });
    // its next heartbeat brings it back
    expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
    expect(await engineState(agent)).toBe('ready');
  });

  it('leaves a window that heartbeats over REST after the drop as it is', async () => {
    const { agent, socket } = await connected();
    await cut(socket);
    await h.clock.advanceSeconds(LIMITS.heartbeatFallbackMs / 1000);
    expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
    await h.clock.advanceSeconds(LIMITS.engineDropGraceSeconds);
    expect(await engineState(agent)).toBe('ready');
  });

  it('leaves a window that moved to another socket before its old one was seen to drop, and heartbeats there every heartbeat_ms', async () => {
    const { agent, socket } = await connected();
    // the new socket (on another node) says hello with a heartbeat …
    expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
    // … and only then does this node notice the old one is gone (a ping timeout, say)
    await h.clock.advanceSeconds(2);
    await cut(socket);
    await h.clock.advanceSeconds(LIMITS.heartbeatMs / 1000 - 2);
    expect(await engineState(agent)).toBe('ready');
    expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
    await h.clock.advanceSeconds(LIMITS.engineDropGraceSeconds);
    expect(await engineState(agent)).toBe('ready');
  });

  it('leaves a window that has another socket on this node, even when it says nothing', async () => {
    const { agent, socket } = await connected();
    const again = openSocket(live.url, agent.engineToken, h.config.siteUrl);
    sockets.push(again);
    await again.next('work');
    await cut(socket);
    await h.clock.advanceSeconds(LIMITS.engineDropGraceSeconds);
    expect(await engineState(agent)).toBe('ready');
  });

  it('never takes a window on a call offline for a drop, nor ends the call', async () => {
    const { t, agent, socket } = await connected();
    const requested = await requestCall(api, t);
    expect(requested.status).toBe(202);
    expect((await api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: agent.engineToken })).status).toBe(200);
    await cut(socket);
    await h.clock.advanceSeconds(LIMITS.engineDropGraceSeconds);
    expect(await engineState(agent)).toBe('ready');
    const call = await api.get(`/calls/${requested.body.call_id}`, { auth: t.serverKey });
    expect(LIVE_STATUSES).toContain(call.body.status);
    expect(call.body.status).not.toBe('queued');
  });
});
