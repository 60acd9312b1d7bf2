/**
 * The push latency on /metrics (c2c_push_latency_seconds) counts from the change beginning to be
 * made, so a store slow to take the change's transaction shows in it, not only the push's own work.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { command, readyAgent } from '../helpers/flows.js';
import { createGatewayHarness, type GatewayHarness } from '../helpers/gateway.js';
import { client } from '../helpers/harness.js';
import { openSocket, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

const STORE_DELAY_MS = 150;

describe('the push latency metric', () => {
  let live: GatewayHarness;
  const sockets: TestSocket[] = [];

  beforeAll(async () => {
    live = await createGatewayHarness('pglite');
  });
  afterAll(async () => {
    for (const s of sockets) s.close();
    await live.close();
  });

  it("includes the time the store took over the change's transaction", async () => {
    const { h, url } = live;
    const t = await seedTenant(h.services);
    const api = client(h.app);
    const { widgetToken } = await readyAgent(api, t);
    const widget = openSocket(url, widgetToken, ORIGIN);
    sockets.push(widget);
    const first = await snapshotOf(widget);
    const bucket = async (le: string) => {
      const text = await h.services.metrics.registry.metrics();
      return Number(new RegExp(`c2c_push_latency_seconds_bucket\\{le="${le}",kind="state"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    };
    const [fastBefore, slowBefore] = [await bucket('0.1'), await bucket('1')];

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
    // One more push, in the ≤ 1 s bucket and not the ≤ 0.1 s one.
    expect([(await bucket('1')) - slowBefore, (await bucket('0.1')) - fastBefore]).toEqual([1, 0]);
  });
});
