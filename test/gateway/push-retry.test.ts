/**
 * A push whose store read fails is tried again (api/domain/push.ts PUSH_RETRY): a widget whose
 * socket is up does not poll, so a push lost to a store blip would leave it showing an old state
 * until the agent's next change.
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

describe('a push whose store read fails', () => {
  let live: GatewayHarness;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    live = await createGatewayHarness('pglite');
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await live.close();
  });

  it('is tried again, and the widget gets the state it would have missed', async () => {
    const { h, url } = live;
    const t = await seedTenant(h.services);
    const api = client(h.app);
    const { widgetToken } = await readyAgent(api, t);
    const widget = openSocket(url, widgetToken, ORIGIN);
    sockets.push(widget);
    const first = await snapshotOf(widget);

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
      const answer = await command(api, widgetToken, { kind: 'availability', request_id: 'during-blip', available: false });
      expect(answer.body).toMatchObject({ ok: true });
      await waitFor(async () => (loads === 2 ? true : undefined), 'the push to fail', 5000);
      await h.clock.advance(PUSH_RETRY.firstMs);
      expect((await pushed).engine.available).toBe(false);
      expect(loads).toBe(3); // the retry read it again
    } finally {
      states.load = load;
    }
  });
});
