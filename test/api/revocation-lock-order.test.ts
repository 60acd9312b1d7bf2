/**
 * Revoking an integration while its windows heartbeat (api/domain/operator/revocation.ts): the
 * revoke locks the windows' rows in id order, as a heartbeat batch does, so the two take turns and
 * never deadlock. PostgreSQL only: PGlite runs one transaction at a time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMember } from '../../api/domain/operator/accounts.js';
import { revokeIntegration } from '../../api/domain/operator/revocation.js';
import { postgresUrl } from '../helpers/env.js';
import { readyAgent } from '../helpers/flows.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { seedTenant } from '../helpers/tenant.js';
import { waitFor } from '../helpers/processes.js';

describe.skipIf(!postgresUrl())('revoking an integration while its windows heartbeat, on pg', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness('pg');
  });
  afterAll(() => h?.close());

  it('takes the windows in id order: a batch holding one window and then taking one with a greater id is not deadlocked, and both commit', async () => {
    const { db } = h.services;
    const api = client(h.app);
    const t = await seedTenant(h.services);
    const deps = { db, bus: h.services.bus, clock: h.services.clock };
    const engineIds: string[] = [];
    const addAgent = async (i: number) => {
      const member = i === 0 ? t.agent : await createMember(deps, { accountId: t.accountId, email: `agent${i}@acme.example`, name: `Agent ${i}`, departmentId: t.salesId });
      engineIds.push((await readyAgent(api, t, member.email)).engineId);
    };
    // The order in which an unordered UPDATE of the integration's live windows takes them (its
    // index's: by member), and the ids' order as PostgreSQL sorts them (a batch's). A batch can
    // deadlock such an UPDATE only where the two differ: made so here, with more windows if need be.
    const order = async (by: string) =>
      (await db.query<{ id: string }>(`SELECT id FROM engines WHERE integration_id = $1 AND state <> 'closed' ${by}`, [t.integrationId])).map((r) => r.id);
    for (let i = 0; i < 6; i += 1) await addAgent(i);
    for (let i = 6; (await order(''))[0] === (await order('ORDER BY id'))[0]; i += 1) await addAgent(i);
    // The batch holds the first window by id, which the UPDATE takes later, then takes the one the UPDATE takes first.
    const [first] = await order('ORDER BY id');
    const [last] = await order('');

    // A heartbeat batch's transaction: it holds the first window's row, then takes the last's.
    let takeLast!: () => void;
    const lastTurn = new Promise<void>((resolve) => (takeLast = resolve));
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const batch = db.tx(async (sql) => {
      await sql.query('SELECT id FROM engines WHERE id = $1 FOR NO KEY UPDATE', [first!]);
      holding();
      await lastTurn;
      await sql.query('SELECT id FROM engines WHERE id = $1 FOR NO KEY UPDATE', [last!]);
    });
    await held;
    const revoked = revokeIntegration(h.services, t.integrationId);
    // once the revoke waits for the first window's row, the batch goes on
    await waitFor(
      async () => ((await db.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM live WHERE e.id = live.id%'"))[0]!.n > 0 ? true : undefined),
      'the revoke waiting for a lock',
      5_000,
    );
    takeLast();
    const outcomes = await Promise.allSettled([batch, revoked]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? String(o.reason) : 'ok'))).toEqual(['ok', 'ok']);
    expect(await revoked).toMatchObject({ engines: engineIds.length });
    const states = await db.query<{ state: string }>('SELECT state FROM engines WHERE id = ANY($1)', [engineIds]);
    expect(states.map((r) => r.state)).toEqual(Array(engineIds.length).fill('closed'));
  });
});
