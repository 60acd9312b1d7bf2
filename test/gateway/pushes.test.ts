/**
 * Pushes as the node that made a change sends them (api/domain/push.ts): the push latency on
 * /metrics (c2c_push_latency_seconds) counts from the change beginning to be made, so a store slow
 * to take the change's transaction shows in it; and a push whose store read fails is tried again
 * (PUSH_RETRY), since a widget whose socket is up does not poll, so a push lost to a store blip
 * would leave it showing an old state until the agent's next change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PUSH_RETRY } from '../../api/domain/push.js';
import { StoreUnavailable } from '../../api/store/pg.js';
import { command, readyAgent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client } from '../helpers/harness.js';
import { waitFor } from '../helpers/processes.js';
import { openSocket, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

const STORE_DELAY_MS = 150;

describe('pushes', () => {
  let live: GatewayHarness;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    live = await createGatewayHarness('pglite');
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await live.close();
  });

  /** A ready agent of a fresh tenant, with a widget socket that has its first snapshot. */
  async function agentWithWidget() {
    const { h, url } = live;
    const t = await seedTenant(h.services);
    const api = client(h.app);
    const { widgetToken } = await readyAgent(api, t);
    const widget = openSocket(url, widgetToken, ORIGIN);
    sockets.push(widget);
    return { h, api, widgetToken, widget, first: await snapshotOf(widget) };
  }

  it("are timed from the change beginning: the latency metric includes the time the store took over its transaction", async () => {
    const { h, api, widgetToken, widget, first } = await agentWithWidget();
    const bucket = async (le: string) => {
      const text = await h.services.metrics.registry.metrics();
      return Number(new RegExp(`c2c_push_latency_seconds_bucket\\{le="${le.replace('+', '\\+')}",kind="state"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    };
    const [fastBefore, allBefore] = [await bucket('0.1'), await bucket('+Inf')];

    // The store takes its time over the availability command's transaction.
    const db = h.services.db;
    const tx = db.tx.bind(db);
    db.tx = (async (fn, options) => {
      await new Promise((resolve) => setTimeout(resolve, STORE_DELAY_MS));
      return tx(fn, options);
    }) as typeof db.tx;
    try {
      const pushed = widget.next('state', { where: (state) => state.version > first.version });
      const answer = await command(api, widgetToken, { kind: 'availability', request_id: 'slow-store', available: false });
      expect(answer.body, JSON.stringify(answer.body)).toMatchObject({ ok: true });
      await pushed;
    } finally {
      db.tx = tx;
    }
    // One more push, not in the ≤ 0.1 s bucket: its time includes the store's 150 ms. (No upper
    // bound: how long the push took beyond that is the machine's, not the rule's.)
    expect([(await bucket('+Inf')) - allBefore, (await bucket('0.1')) - fastBefore]).toEqual([1, 0]);
  });

  it('whose store read fails is tried again, the widget gets the state it would have missed, and they are settled only once the retry ran (c2c waits for that before it closes)', async () => {
    const { h, api, widgetToken, widget, first } = await agentWithWidget();

    // The command reads the state to decide (its first load); the push after it (the second) meets a store blip.
    const states = h.services.widgetStates;
    const load = states.load.bind(states);
    let loads = 0;
    states.load = async (integrationId, memberId) => {
      loads += 1;
      if (loads === 2) throw new StoreUnavailable(Object.assign(new Error('connection lost'), { code: 'ECONNRESET' }));
      return load(integrationId, memberId);
    };
    try {
      const pushed = widget.next('state', { where: (state) => state.version > first.version });
      const answer = await command(api, widgetToken, { kind: 'availability', request_id: 'settle-after-retry', available: false });
      expect(answer.body).toMatchObject({ ok: true });
      await waitFor(async () => (loads === 2 ? true : undefined), 'the push to fail', 5000);
      let loadsWhenSettled: number | undefined;
      const settling = h.services.pusher.settled().then((done) => ((loadsWhenSettled = loads), done));
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(loadsWhenSettled).toBeUndefined(); // its retry still waits
      await h.clock.advance(PUSH_RETRY.firstMs);
      expect(await settling).toBe(true);
      expect(loadsWhenSettled).toBe(3); // the retry read it again
      expect((await pushed).engine.available).toBe(false);
    } finally {
      states.load = load;
    }
  });

  it("whose read of the agent fails is tried again too, not taken for an agent no longer there", async () => {
    const { h, api, widgetToken, widget, first } = await agentWithWidget();
    const { directory } = h.services;
    const agent = directory.agent.bind(directory);
    let failed = 0;
    // the store blips as the push reads the agent (its check: still valid, its policy)
    directory.agent = async (integration, memberId) => {
      if (failed === 0 && new Error().stack?.includes('agentState')) {
        failed += 1;
        throw new StoreUnavailable(Object.assign(new Error('connection lost'), { code: 'ECONNRESET' }));
      }
      return agent(integration, memberId);
    };
    try {
      const pushed = widget.next('state', { where: (state) => state.version > first.version });
      const answer = await command(api, widgetToken, { kind: 'availability', request_id: 'agent-blip', available: false });
      expect(answer.body).toMatchObject({ ok: true });
      await waitFor(async () => (failed === 1 ? true : undefined), 'the push to fail', 5000);
      await h.clock.advance(PUSH_RETRY.firstMs);
      expect((await pushed).engine.available).toBe(false);
    } finally {
      directory.agent = agent;
    }
  });
});
