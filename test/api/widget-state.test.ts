/** GET /widget/state as the poll path: ETag and If-None-Match, and the version bumped by changes. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WidgetState } from '../../shared/schemas/widget-api.js';
import { storeDrivers } from '../helpers/env.js';
import { client, createHarness, withTwoNodes, type Client, type Harness } from '../helpers/harness.js';
import { command, heartbeat, launchTicket, openSession, readyAgent, requestCall } from '../helpers/flows.js';
import { setPolicy, setWindowMode } from '../../api/domain/operator/integrations.js';
import { ORIGIN, seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('the poll path on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
    api = client(h.app);
  });
  afterAll(() => h.close());

  const poll = (token: string, etag?: string) => api.get('/widget/state', { auth: token, origin: ORIGIN, headers: etag ? { 'if-none-match': etag } : {} });

  it('answers 304 with no body while nothing changed, and 200 with a higher version after a change', async () => {
    const agent = await readyAgent(api, t);
    const first = await poll(agent.widgetToken);
    expect(first.status).toBe(200);
    const etag = String(first.headers.etag);
    expect(etag).toMatch(/^".+"$/);
    WidgetState.parse(first.body);

    await h.clock.advanceSeconds(5);
    const unchanged = await poll(agent.widgetToken, etag);
    expect(unchanged.status).toBe(304);
    expect(unchanged.body).toBeUndefined();
    expect(unchanged.headers.etag).toBe(etag);

    const availability = await command(api, agent.widgetToken, { kind: 'availability', request_id: 'away-1', available: false });
    expect(availability.body.status).toBe('done');
    const changed = await poll(agent.widgetToken, etag);
    expect(changed.status).toBe(200);
    expect(changed.body.version).toBeGreaterThan(first.body.version);
    expect(changed.body.engine.available).toBe(false);
    expect(changed.headers.etag).not.toBe(etag);
  });

  it("tells a live window's last heard time by `live`, not a count that would grow with the cached state's age; an offline window's is its silence", async () => {
    const own = await seedTenant(h.services);
    const agent = await readyAgent(api, own);
    await poll(agent.widgetToken); // the agent's state now cached on this node
    for (let i = 0; i < 10; i += 1) {
      await h.clock.advanceSeconds(15);
      expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
    }
    const live = await poll(agent.widgetToken);
    expect(live.body.engine).toMatchObject({ live: true, state: 'ready', last_seen_ago: null });
    await h.clock.advanceSeconds(95);
    await h.services.reaper.tick();
    const offline = await poll(agent.widgetToken);
    expect(offline.body.engine).toMatchObject({ live: false, state: 'offline' });
    expect(offline.body.engine.last_seen_ago).toBeGreaterThanOrEqual(95);
    expect(offline.body.engine.last_seen_ago).toBeLessThan(100);
  });

  it("carries the integration's 'Call window opens as' setting in Policy.widget, in the session and the state, and a change reaches the next poll", async () => {
    const operator = { db: h.services.db, bus: h.services.bus, clock: h.clock };
    const session = await api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, origin: ORIGIN }, { auth: t.serverKey });
    expect(session.body.policy.widget).toMatchObject({ window_mode: 'popup' });
    const first = await poll(session.body.widget_token);
    expect(first.body.policy.widget.window_mode).toBe('popup');
    await setWindowMode(operator, t.integrationId, 'tab');
    try {
      const changed = await poll(session.body.widget_token, String(first.headers.etag));
      expect(changed.status).toBe(200);
      expect(changed.body.policy.widget).toEqual({ ...first.body.policy.widget, window_mode: 'tab' });
    } finally {
      await setWindowMode(operator, t.integrationId, 'popup');
    }
  });

  it('compares If-None-Match as HTTP does: a weakened tag, any tag of a list, or * answers 304; other tags 200', async () => {
    const agent = await readyAgent(api, t);
    const etag = String((await poll(agent.widgetToken)).headers.etag);
    for (const header of [`W/${etag}`, `"stale", ${etag}`, ` W/"stale" ,W/${etag} `, '*']) {
      expect((await poll(agent.widgetToken, header)).status, header).toBe(304);
    }
    for (const header of ['"stale"', `W/"stale", "${etag.slice(1, -2)}"`, etag.slice(1, -1)]) {
      expect((await poll(agent.widgetToken, header)).status, header).toBe(200);
    }
  });

  it('keeps the cached state exact: every change is visible on the very next poll', async () => {
    const agent = await readyAgent(api, t, t.agent.email);
    let last = (await poll(agent.widgetToken)).body.version as number;
    const seen: string[] = [];
    const requested = await requestCall(api, t);
    expect(requested.status).toBe(202);
    for (const seconds of [0, 1, 2]) {
      await h.clock.advanceSeconds(seconds);
      const state = await poll(agent.widgetToken);
      expect(state.body.version).toBeGreaterThanOrEqual(last);
      last = state.body.version;
      seen.push(state.body.call.status);
      if (seconds === 0) await api.post('/engine/claim', { request_id: requested.body.request_id }, { auth: agent.engineToken });
    }
    expect(seen).toEqual(['queued', 'ringing', 'connected']);
    await api.post(`/calls/${requested.body.request_id}/hangup`, undefined, { auth: t.serverKey });
    expect((await poll(agent.widgetToken)).body.call.status).toBe('completed');
  });
});

describe.each(storeDrivers())('the poll path of a node that hears of a change late, on %s', (driver) => {
  it("answers 200, not 304, once it has heard of a policy change it first rendered under the new version with the agent's old policy", async () => {
    // Two nodes on one store, each with its own bus: what node Y announces reaches node X only when
    // the test delivers it, as Redis would a moment later.
    await withTwoNodes(driver, async (x, y) => {
      const t = await seedTenant(y.services);
      const token = await openSession(client(y.app), t);
      const onX = client(x.app);
      // Node X checks the token (its directory now holds the agent) without reading the state.
      await launchTicket(onX, token);
      await setPolicy({ db: y.services.db, bus: y.services.bus, clock: y.clock }, t.integrationId, { outbound: false });

      const poll = (etag?: string) => onX.get('/widget/state', { auth: token, origin: ORIGIN, headers: etag ? { 'if-none-match': etag } : {} });
      const early = await poll();
      expect(early.status).toBe(200);
      expect(early.body.policy.outbound).toBe(true);
      x.services.bus.publish({ type: 'integration', integrationId: t.integrationId });
      const heard = await poll(String(early.headers.etag));
      expect(heard.status).toBe(200);
      expect(heard.body.version).toBe(early.body.version);
      expect(heard.body.policy.outbound).toBe(false);
      expect((await poll(String(heard.headers.etag))).status).toBe(304);
    });
  });

  it('does not keep a state read before a resync of the bus: a change whose message the outage lost is seen on the next poll', async () => {
    await withTwoNodes(driver, async (x, y) => {
      const t = await seedTenant(y.services);
      const agent = await readyAgent(client(y.app), t);
      const onX = client(x.app);
      // Node X's read of the agent's state has its rows, and is slow to come back with them.
      const db = x.services.db;
      const query = db.query;
      let release!: () => void;
      let read!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const hasRead = new Promise<void>((resolve) => (read = resolve));
      let holding = true;
      db.query = (async (text: string, params?: readonly unknown[]) => {
        const rows = await query.call(db, text, params);
        if (holding && text.includes('agent_versions')) {
          holding = false;
          read();
          await held;
        }
        return rows;
      }) as typeof db.query;
      let first: Promise<{ status: number; body: any }>;
      try {
        first = poll(onX, agent.widgetToken);
        await hasRead;
      } finally {
        db.query = query;
      }
      // Meanwhile node Y mutes the window, and its message to X is lost in a bus outage, after
      // which X's bus reconnects and says so (resync).
      expect((await heartbeat(client(y.app), agent.engineToken, { muted: true })).status).toBe(200);
      x.services.bus.publish({ type: 'resync' });
      release();
      expect((await first).body.engine.muted).toBe(false);
      expect((await poll(onX, agent.widgetToken)).body.engine.muted).toBe(true);
    });
  });
});

const poll = (api: Client, token: string) => api.get('/widget/state', { auth: token, origin: ORIGIN });
