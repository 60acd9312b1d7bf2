/**
 * The store stays fast as history grows: on a PostgreSQL holding a busy year's worth of another
 * agent's calls, windows, commands and sessions, none of the statements the product runs for a
 * whole call (REST, engine, provider webhooks, the reaper's every-second rules, logout, an
 * integration's revocation) reads a history table from end to end. Every statement is recorded as
 * it runs, then planned as the product plans it (a generic plan: api/store/pg.ts) and the plan is
 * searched for a sequential scan of those tables.
 *
 * What this guards against: a status list passed as a parameter (`status = ANY($2)`) cannot use
 * the partial indexes on live calls under a generic plan, so the reaper read every call ever made
 * each second, and a call request every call of its account (api/domain/calls/checks.ts).
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Db, Sql } from '../../api/store/index.js';
import { postgresUrl } from '../helpers/env.js';
import { openTestDatabase } from '../helpers/databases.js';
import { command, heartbeat, launchTicket, openSession, readyAgent, requestCall, widgetState } from '../helpers/flows.js';
import { client, createHarness } from '../helpers/harness.js';
import { ORIGIN, UK_NUMBER, seedTenant } from '../helpers/tenant.js';
import { historyOf, loadHistory } from '../helpers/history.js';
import { revokeIntegration } from '../../api/domain/operator/revocation.js';

/** The tables that grow with use; a statement may scan the others (a few rows each). */
const HISTORY = ['call_intents', 'engines', 'widget_commands', 'widget_sessions', 'launch_tickets', 'wallet_ledger', 'blocked_numbers'];
/** Statements that read a whole table by design, marked so in their text. */
const SCANS_BY_DESIGN = '/* scans by design';

/** A Db that records every statement's text before running it. */
function recording(db: Db, seen: Set<string>): Db {
  const wrap = (sql: Sql): Sql => ({
    query: (text, params) => {
      seen.add(text);
      return sql.query(text, params);
    },
  });
  return {
    driver: db.driver,
    query: wrap(db).query,
    tx: (fn, options) => db.tx((sql) => fn(wrap(sql)), options),
    exec: (script) => db.exec(script),
    unavailableCount: () => db.unavailableCount(),
    close: () => db.close(),
  };
}

/** The history tables a statement's generic plan reads sequentially. */
async function scannedTables(admin: pg.Client, text: string): Promise<string[]> {
  const parameters = Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  await admin.query(`PREPARE planned AS ${text}`);
  try {
    // The generic plan does not depend on the values, so nulls stand in for them.
    const args = parameters ? `(${Array(parameters).fill('NULL').join(', ')})` : '';
    const [row] = (await admin.query(`EXPLAIN (FORMAT JSON) EXECUTE planned${args}`)).rows;
    const scanned: string[] = [];
    const walk = (node: Record<string, unknown>) => {
      if (node['Node Type'] === 'Seq Scan' && HISTORY.includes(node['Relation Name'] as string)) scanned.push(node['Relation Name'] as string);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((row['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return scanned;
  } finally {
    await admin.query('DEALLOCATE planned');
  }
}

describe.skipIf(!postgresUrl())('statement plans on a store with a long history (PostgreSQL)', () => {
  it('read no history table from end to end, for a whole call and the reaper', { timeout: 120_000 }, async () => {
    const database = await openTestDatabase('pg');
    const seen = new Set<string>();
    const h = await createHarness('pg', {}, { database: { ...database, db: recording(database.db, seen) } });
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      // any other member of the account: its rows are not the workload's
      await loadHistory(admin, { integrationId: t.integrationId, accountId: t.accountId, memberId: t.disabled.id, origin: ORIGIN }, h.clock.now(), historyOf(100_000));
      await admin.query('SET plan_cache_mode = force_generic_plan');
      seen.clear(); // the seeding's statements are the operator's, not the workload's

      // An outgoing call from request to hangup, with commands and polls on the way.
      const agent = await readyAgent(api, t);
      const requested = await requestCall(api, t, {}, 'order-1');
      expect(requested.status).toBe(202);
      expect((await requestCall(api, t, {}, 'order-1')).status).toBe(200); // an idempotent replay
      const id = requested.body.request_id as string;
      await heartbeat(api, agent.engineToken);
      expect((await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken })).status).toBe(200);
      await heartbeat(api, agent.engineToken, { call_id: id });
      await h.clock.advanceSeconds(3);
      expect((await api.get(`/calls/${id}`, { auth: t.serverKey })).body.status).toBe('connected');
      expect((await command(api, agent.widgetToken, { kind: 'mute', request_id: 'm-1' })).status).toBe(200);
      expect((await command(api, agent.widgetToken, { kind: 'dtmf', request_id: 'd-1', digits: '12#' })).status).toBe(200);
      await heartbeat(api, agent.engineToken, { call_id: id });
      expect((await widgetState(api, agent.widgetToken)).status).toBe(200);
      expect((await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'h-1' })).body).toMatchObject({ status: 'done' });
      expect((await api.get(`/calls/${id}`, { auth: t.serverKey })).body.status).toBe('completed');

      // An incoming call that rings and is declined; a call the backend ends.
      const incoming = await api.post('/simulated/inbound-calls', { integration_id: t.integrationId, from: UK_NUMBER }, { auth: t.serverKey });
      expect(incoming.status).toBe(201);
      await heartbeat(api, agent.engineToken);
      expect((await command(api, agent.widgetToken, { kind: 'decline', request_id: 'x-1' })).status).toBe(200);
      const ended = await requestCall(api, t, {}, 'order-2');
      expect((await api.post(`/calls/${ended.body.request_id}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);

      // Refresh, a new window replacing the old, the reaper's rules (an engine going quiet with
      // a call on it), logout, and the integration revoked.
      const refreshed = await api.post('/widget/refresh', undefined, { auth: agent.widgetToken, origin: ORIGIN });
      expect(refreshed.status).toBe(200);
      const other = await readyAgent(api, t);
      const quiet = await requestCall(api, t, {}, 'order-3');
      await heartbeat(api, other.engineToken);
      expect((await api.post('/engine/claim', { request_id: quiet.body.request_id }, { auth: other.engineToken })).status).toBe(200);
      for (let second = 0; second < 100; second += 10) {
        await h.clock.advanceSeconds(10);
        await h.services.reaper.tick();
      }
      expect((await api.get(`/calls/${quiet.body.request_id}`, { auth: t.serverKey })).body.status).not.toBe('connected');
      await launchTicket(api, await openSession(api, t));
      expect((await api.post('/widget/revoke', undefined, { auth: refreshed.body.widget_token, origin: ORIGIN })).status).toBe(200);
      await revokeIntegration({ db: h.services.db, bus: h.services.bus, clock: h.clock, providers: h.services.providers }, t.integrationId);

      const found: string[] = [];
      for (const text of seen) {
        if (text.includes(SCANS_BY_DESIGN)) continue;
        const tables = await scannedTables(admin, text);
        if (tables.length) found.push(`${tables.join(', ')} ← ${text.replace(/\s+/g, ' ')}`);
      }
      expect(seen.size).toBeGreaterThan(50);
      expect(found).toEqual([]);
    } finally {
      await admin.end();
      await h.close();
      await database.drop();
    }
  });
});
