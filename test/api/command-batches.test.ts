/**
 * Widget commands recorded together (api/domain/commands/store.ts): what arrives in one turn of
 * the event loop goes to the store in one statement, on both drivers. Each command still gets its
 * own row and answer, a request_id taken twice in one batch is recorded once, an engine's other
 * new work rides with its first command, and one bad command fails alone.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createCommandStore, type CommandStore, type NewCommand } from '../../api/domain/commands/store.js';
import type { Command } from '../../shared/types.js';
import { storeDrivers } from '../helpers/env.js';
import { readyAgent, type Agent } from '../helpers/flows.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('commands recorded together on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let agent: Agent;
  let store: CommandStore;

  beforeAll(async () => {
    h = await createHarness(driver);
    t = await seedTenant(h.services);
    agent = await readyAgent(client(h.app), t);
    store = createCommandStore(h.services.db);
  });
  afterAll(() => h.close());

  const focus = (requestId: string, handOver: boolean, memberId = t.agent.id): NewCommand => ({
    integrationId: t.integrationId,
    memberId,
    command: { kind: 'focus', request_id: requestId } as Command,
    callId: null,
    engineId: agent.engineId,
    status: 'queued',
    refused: null,
    now: h.clock.now(),
    handOver,
  });
  const row = async (id: number) =>
    (await h.services.db.query<{ status: string; deliveries: number }>('SELECT status, deliveries FROM widget_commands WHERE id = $1', [id]))[0];

  it('gives each command its row, records a request_id taken twice once, and hands the engine its new work with its first command', async () => {
    const queued = await store.record(focus('b-queued', false));
    const statements = vi.spyOn(h.services.db, 'query');
    const [first, second, again] = await Promise.all([store.record(focus('b-1', true)), store.record(focus('b-2', true)), store.record(focus('b-1', true))]);
    // called in one turn: one statement for the three
    expect(statements.mock.calls.filter(([text]) => /INSERT INTO widget_commands/.test(String(text)))).toHaveLength(1);
    statements.mockRestore();
    expect(first!.work!.handed.map((c) => Number(c.id))).toEqual([queued!.row.id, first!.row.id].map(Number));
    expect(second!.work!.handed.map((c) => Number(c.id))).toEqual([Number(second!.row.id)]);
    expect(again).toBeNull();
    for (const recorded of [queued, first, second]) expect(await row(recorded!.row.id)).toEqual({ status: 'delivered', deliveries: 1 });
    const counted = await h.services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM widget_commands WHERE request_id = 'b-1'`);
    expect(counted).toEqual([{ n: 1 }]);
  });

  it('fails only the command that cannot be recorded; the rest of its batch is recorded', async () => {
    const results = await Promise.allSettled([store.record(focus('c-1', false)), store.record(focus('c-2', false, 'no-such-member')), store.record(focus('c-3', false))]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    for (const r of [results[0], results[2]]) expect(await row((r as PromiseFulfilledResult<{ row: { id: number } }>).value.row.id)).toMatchObject({ status: 'queued' });
  });

  it('looks up many commands at once, each with its own replay, engine and call', async () => {
    const key = (requestId: string, memberId = t.agent.id) => ({ integrationId: t.integrationId, memberId, requestId, ref: null });
    const [seen, fresh, stranger] = await Promise.all([store.lookUp(key('b-2')), store.lookUp(key('never-sent')), store.lookUp(key('b-2', t.outside.id))]);
    expect(seen.seen).toMatchObject({ request_id: 'b-2', kind: 'focus' });
    expect(seen.engine?.id).toBe(agent.engineId);
    expect(fresh).toMatchObject({ seen: null, engine: { id: agent.engineId }, call: null });
    expect(stranger).toEqual({ seen: null, engine: null, call: null });
  });
});
