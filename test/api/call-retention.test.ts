/**
 * Retention of call records (CALL_RETENTION_DAYS, api/domain/retention.ts), with a clock the test
 * moves: by default every call stays; with a window, the reaper deletes calls that ended longer ago
 * than it (the ledger keeps their debits), never a live call, and an Idempotency-Key that old is
 * new again.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { createMember } from '../../api/domain/operator/accounts.js';
import { command, openSession, readyAgent, requestCall, widgetState } from '../helpers/flows.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

const DAY_MS = 24 * 3600 * 1000;

async function calls(h: Harness): Promise<Array<{ id: string; status: string }>> {
  return h.services.db.query('SELECT id, status FROM call_intents ORDER BY created_at, id');
}

describe.each(storeDrivers())('call records (%s)', (driver) => {
  it('are all kept by default', async () => {
    const h = await createHarness(driver);
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      await readyAgent(api, t);
      const requested = await requestCall(api, t, {}, 'key-kept');
      expect((await api.post(`/calls/${requested.body.request_id}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
      await h.clock.advance(400 * DAY_MS);
      await h.services.reaper.tick();
      expect((await api.get(`/calls/${requested.body.request_id}`, { auth: t.serverKey })).body).toMatchObject({ status: 'canceled' });
      // the key still answers with its call
      expect((await requestCall(api, t, {}, 'key-kept')).body.request_id).toBe(requested.body.request_id);
    } finally {
      await h.close();
    }
  });

  it('that ended longer ago than CALL_RETENTION_DAYS are deleted, their debits and commands kept; a live call and a recent one stay', async () => {
    const h = await createHarness(driver, { callRetentionDays: 30 });
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const bob = (await createMember({ db: h.services.db, bus: h.services.bus, clock: h.clock }, { accountId: t.accountId, email: 'bob@acme.example', name: 'Bob', departmentId: t.salesId })).email;
      const agent = await readyAgent(api, t);
      // an answered call, muted from the widget and billed: it rings 3 s, talks 60 s and is hung up
      const talked = (await requestCall(api, t, {}, 'key-old')).body.request_id as string;
      expect((await api.post('/engine/claim', { request_id: talked }, { auth: agent.engineToken })).status).toBe(200);
      await h.clock.advance(3_000);
      const muted = await command(api, agent.widgetToken, { kind: 'mute', request_id: 'mute-old', ref: talked });
      expect(muted.body).toMatchObject({ ok: true });
      await h.clock.advance(60_000);
      expect((await api.post(`/calls/${talked}/hangup`, undefined, { auth: t.serverKey })).body).toMatchObject({ status: 'completed', duration: 60 });
      const [debit] = await h.services.db.query<{ amount_micros: string }>('SELECT amount_micros FROM wallet_ledger WHERE call_id = $1', [talked]);
      expect(Number(debit!.amount_micros)).toBeLessThan(0);

      // 29 days later: not yet
      await h.clock.advance(29 * DAY_MS);
      await h.services.reaper.tick();
      expect((await calls(h)).map((call) => call.id)).toEqual([talked]);

      // another agent's call of day 29 (ended), and one of theirs live when the window has passed for the first
      await readyAgent(api, t, bob);
      const recent = (await requestCall(api, t, { agent: { type: 'email', value: bob } })).body.request_id as string;
      expect((await api.post(`/calls/${recent}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
      await h.clock.advance(DAY_MS + 60_000);
      await readyAgent(api, t, bob);
      const live = (await requestCall(api, t, { agent: { type: 'email', value: bob } })).body.request_id as string;
      expect((await api.get(`/calls/${live}`, { auth: t.serverKey })).body.status).toBe('queued');
      // the first agent's widget still shows the old call as its last
      const widgetToken = await openSession(api, t);
      const shown = await widgetState(api, widgetToken);
      expect(shown.body.call).toMatchObject({ call_id: talked });

      // the hourly pass (in the same moment: the queued call has not expired)
      await h.services.reaper.tick();
      expect((await calls(h)).map((call) => call.id)).toEqual([recent, live]);
      await expectError(api.get(`/calls/${talked}`, { auth: t.serverKey }), 404, 'not_found');
      // what the widget shows changed, and so did its version (its ETag)
      const after = await api.get('/widget/state', { auth: widgetToken, origin: ORIGIN, headers: { 'if-none-match': shown.headers.etag as string } });
      expect(after.status).toBe(200);
      expect(after.body.call).toBeNull();
      expect(after.body.version).toBeGreaterThan(shown.body.version);
      // the wallet's record of what it paid stays, no longer naming the call; the command's record keeps its id
      expect(await h.services.db.query('SELECT call_id, amount_micros FROM wallet_ledger WHERE amount_micros = $1', [debit!.amount_micros])).toEqual([
        { call_id: null, amount_micros: debit!.amount_micros },
      ]);
      expect(await h.services.db.query('SELECT call_id FROM widget_commands WHERE id = $1', [muted.body.command_id])).toEqual([{ call_id: talked }]);
      // the old key is new again: a second call is created under it
      await readyAgent(api, t);
      const again = await requestCall(api, t, {}, 'key-old');
      expect(again.status, JSON.stringify(again.body)).toBe(202);
      expect(again.body.request_id).not.toBe(talked);
    } finally {
      await h.close();
    }
  });

  it('reads CALL_RETENTION_DAYS: unset keeps every call, and a window is a whole number of days', () => {
    expect(loadConfig({}).callRetentionDays).toBeUndefined();
    expect(loadConfig({ CALL_RETENTION_DAYS: '365' }).callRetentionDays).toBe(365);
    for (const bad of ['0', '1.5', 'month']) expect(() => loadConfig({ CALL_RETENTION_DAYS: bad })).toThrow(/CALL_RETENTION_DAYS/);
  });
});
