/**
 * Engine heartbeats reported together (api/domain/engines/heartbeat.ts): the heartbeats a node
 * receives in one turn of the event loop go to the store in one statement, on both drivers. Each
 * window still gets exactly its own engine, commands, acks and call; two heartbeats of the same
 * window are applied one after the other, in order. Their tokens are read together too.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createDirectory } from '../../api/domain/directory.js';
import { createEngineAuth } from '../../api/domain/engines/auth.js';
import type { HeartbeatVia } from '../../api/domain/engines/heartbeat.js';
import type { HeartbeatRequest } from '../../shared/schemas/engine-api.js';
import { storeDrivers } from '../helpers/env.js';
import { command, READY, readyAgent, requestCall, type Agent } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('heartbeats reported together on %s', (driver) => {
  let h: Harness;
  let api: Client;
  const tenants: Tenant[] = [];
  const agents: Agent[] = [];

  beforeAll(async () => {
    h = await createHarness(driver);
    api = client(h.app);
    for (let i = 0; i < 3; i += 1) {
      const t = await seedTenant(h.services);
      tenants.push(t);
      agents.push(await readyAgent(api, t));
    }
  });
  afterAll(() => h.close());

  const beat = async (agent: Agent, report: Partial<HeartbeatRequest> = {}, via: HeartbeatVia = 'socket') =>
    h.services.engines.heartbeat(await h.services.engines.authenticate(agent.engineToken), { ...READY, acks: [], ...report } as HeartbeatRequest, via);

  it("answers each window of a batch with its own engine, commands and call", async () => {
    const focus = await Promise.all(agents.map((agent, i) => command(api, agent.widgetToken, { kind: 'focus', request_id: `hb-${i}` })));
    const requested = await requestCall(api, tenants[1]!);
    const contexts = await Promise.all(agents.map((agent) => h.services.engines.authenticate(agent.engineToken)));
    const versions = () =>
      Promise.all(
        tenants.map(async (t) => (await h.services.db.query<{ version: number }>('SELECT version FROM agent_versions WHERE integration_id = $1 AND member_id = $2', [t.integrationId, t.agent.id]))[0]!.version),
      );
    const before = await versions();
    // called in one turn: one statement for the three
    const results = await Promise.all(
      contexts.map((context, i) => h.services.engines.heartbeat(context, { ...READY, muted: i === 2, acks: [] } as HeartbeatRequest, 'rest')),
    );
    results.forEach((result, i) => {
      expect(result.engine.id).toBe(agents[i]!.engineId);
      expect(result.commands.map((c) => c.command_id)).toEqual([focus[i]!.body.command_id]);
      expect(result.engine.muted).toBe(i === 2);
    });
    expect(results.map((r) => r.dialRequests.map((d) => d.request_id))).toEqual([[], [requested.body.request_id], []]);
    expect(results.map((r) => r.call)).toEqual([null, null, null]);
    // the muted window's agent has a new WidgetState version; the others are unchanged
    const after = await versions();
    expect(after.map((version, i) => version - before[i]!)).toEqual([0, 0, 1]);
    await api.post(`/calls/${requested.body.request_id}/hangup`, undefined, { auth: tenants[1]!.serverKey });
  });

  it('applies two heartbeats of one window in order: the second sees the first one\'s ack', async () => {
    const agent = agents[0]!;
    const sent = await command(api, agent.widgetToken, { kind: 'focus', request_id: 'hb-order' });
    const handed = await beat(agent);
    expect(handed.commands.map((c) => c.command_id)).toEqual([sent.body.command_id]);
    const [acking, after] = await Promise.all([beat(agent, { acks: [{ command_id: sent.body.command_id, result: 'done' }] }), beat(agent, { muted: true })]);
    expect(acking.firstAcks.map((a) => a.command_id)).toEqual([sent.body.command_id]);
    expect(after.commands).toEqual([]);
    expect(after.engine.muted).toBe(true);
    const rows = await h.services.db.query<{ status: string; acks: number }>('SELECT status, acks FROM widget_commands WHERE id = $1', [sent.body.command_id]);
    expect(rows).toEqual([{ status: 'done', acks: 1 }]);
  });

  it('hands a report over REST every unacked command, and one over the socket only those overdue, in the same statement', async () => {
    const [viaRest, viaSocket] = [agents[1]!, agents[2]!];
    const sent = await Promise.all([viaRest, viaSocket].map((agent, i) => command(api, agent.widgetToken, { kind: 'focus', request_id: `hb-via-${i}` })));
    // handed over moments ago (no socket here: a heartbeat hands it over), acks not in yet
    const first = await Promise.all([beat(viaRest), beat(viaSocket)]);
    expect(first.map((r) => r.commands.some((c) => c.command_id === sent[0]!.body.command_id || c.command_id === sent[1]!.body.command_id))).toEqual([true, true]);
    // called in one turn: one statement for both
    const [restContext, socketContext] = await Promise.all([viaRest, viaSocket].map((agent) => h.services.engines.authenticate(agent.engineToken)));
    const report = { ...READY, acks: [] } as HeartbeatRequest;
    const statements = vi.spyOn(h.services.db, 'query');
    const [rest, socket] = await Promise.all([h.services.engines.heartbeat(restContext!, report, 'rest'), h.services.engines.heartbeat(socketContext!, report, 'socket')]);
    expect(statements.mock.calls.filter(([text]) => String(text).startsWith('WITH input AS'))).toHaveLength(1);
    statements.mockRestore();
    expect(rest.commands.map((c) => c.command_id)).toContain(sent[0]!.body.command_id);
    expect(socket.commands.map((c) => c.command_id)).not.toContain(sent[1]!.body.command_id);
  });

  it('counts each command acked for the first time on /metrics, by how the ack came, and no ack twice', async () => {
    const acked = async (via: string) => ((await h.services.metrics.acks.get()).values.find((v) => v.labels.via === via)?.value ?? 0);
    const agent = agents[2]!;
    const [byHeartbeat, bySocket] = await Promise.all(['m-1', 'm-2'].map((id) => command(api, agent.widgetToken, { kind: 'focus', request_id: id })));
    await beat(agent);
    const before = { heartbeat: await acked('heartbeat'), socket: await acked('socket') };
    const ackOf = (sent: typeof byHeartbeat) => [{ command_id: sent!.body.command_id as number, result: 'done' as const }];
    await beat(agent, { acks: ackOf(byHeartbeat) }, 'rest');
    await beat(agent, { acks: ackOf(byHeartbeat) }, 'socket');
    // a first ack that reports a failure counts too
    const failed = [{ command_id: bySocket!.body.command_id as number, result: 'failed' as const, error: 'no audio device' }];
    const context = await h.services.engines.authenticate(agent.engineToken);
    await h.services.engines.ack(context, failed);
    await h.services.engines.ack(context, failed);
    expect({ heartbeat: await acked('heartbeat'), socket: await acked('socket') }).toEqual({ heartbeat: before.heartbeat + 1, socket: before.socket + 1 });
  });

  it('authenticates the tokens of many windows arriving together: each gets its own engine, a wrong or unknown one is refused', async () => {
    // a fresh authenticator: nothing cached, as on a gateway that just restarted
    const { db, bus, clock } = h.services;
    const auth = createEngineAuth(db, bus, clock, createDirectory(db, bus, clock));
    const wrongSecret = agents[0]!.engineToken.slice(0, -4) + 'zzzz';
    const unknown = 'c2ce_' + 'x'.repeat(48);
    const tokens = [...agents.map((a) => a.engineToken), agents[1]!.engineToken, wrongSecret, unknown];
    const results = await Promise.allSettled(tokens.map((token) => auth(token)));
    expect(results.map((r) => (r.status === 'fulfilled' ? r.value.engine.id : (r.reason as { code?: string }).code))).toEqual([
      ...agents.map((a) => a.engineId),
      agents[1]!.engineId,
      'unauthorized',
      'unauthorized',
    ]);
  });

  it("applies socket acks of several windows arriving together, each to its own window's commands: another window's ack neither applies nor hides the owner's", async () => {
    const sent = await Promise.all(agents.map((agent, i) => command(api, agent.widgetToken, { kind: 'focus', request_id: `ack-${i}` })));
    const ids = sent.map((c) => c.body.command_id as number);
    const contexts = await Promise.all(agents.map((agent) => h.services.engines.authenticate(agent.engineToken)));
    // one turn, one statement: window 0 acks its own command and, first, window 1's; window 1 acks
    // its own; window 2 acks its own twice in one event
    await Promise.all([
      h.services.engines.ack(contexts[0]!, [{ command_id: ids[1]!, result: 'failed', error: 'not mine' }, { command_id: ids[0]!, result: 'done' }]),
      h.services.engines.ack(contexts[1]!, [{ command_id: ids[1]!, result: 'done' }]),
      h.services.engines.ack(contexts[2]!, [{ command_id: ids[2]!, result: 'done' }, { command_id: ids[2]!, result: 'done' }]),
    ]);
    const rows = await h.services.db.query<{ id: string; status: string; acks: number; error: string | null }>('SELECT id, status, acks, error FROM widget_commands WHERE id = ANY($1::bigint[]) ORDER BY id', [ids]);
    // (the three commands were sent together: their ids need not follow the agents' order)
    expect(rows.map((row) => [Number(row.id), row.status, row.acks, row.error])).toEqual([...ids].sort((a, b) => a - b).map((id) => [id, 'done', 1, null]));
    // a lone ack again (one VALUES row): counted, the result kept
    await h.services.engines.ack(contexts[0]!, [{ command_id: ids[0]!, result: 'failed', error: 'late' }]);
    const [row] = await h.services.db.query<{ status: string; acks: number }>('SELECT status, acks FROM widget_commands WHERE id = $1', [ids[0]]);
    expect(row).toEqual({ status: 'done', acks: 2 });
  });
});
