/**
 * Three processes on real PostgreSQL and Redis (issue "Real-time gateway", Done when): one api
 * node and two gateway nodes. A REST command handled by the api reaches an engine socket on
 * gateway B; a state change reaches widgets on both gateways; Redis stopped and restarted crashes
 * nothing, REST stays correct and push resumes; killing node B sends its clients to node A with
 * the current snapshot; a call's commands cross from a widget on one gateway to its window on the
 * other; the store's audit shows no command lost and none executed twice.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { createPgDatabase } from '../helpers/databases.js';
import { postgresUrl, redisUrl } from '../helpers/env.js';
import { freePort, healthy, spawnNode, spawnRedis, waitFor, type NodeProcess } from '../helpers/processes.js';
import { openSocket, request, snapshotOf, type TestSocket } from '../helpers/sockets.js';
import { CommandRunner } from '../../window/src/commands.js';
import type { EngineCommand } from '../../window/src/api.js';

const canRun = Boolean(postgresUrl() && redisUrl());

interface Agent {
  widgetToken: string;
  engineToken: string;
  /** the call window's own command runner: one per window, whichever way a command reaches it */
  runner: CommandRunner;
}

describe.skipIf(!canRun)('api + two gateways on PostgreSQL and Redis', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'c2c-multi-'));
  let database: { url: string; drop(): Promise<void> };
  let redis: ReturnType<typeof spawnRedis>;
  let api: NodeProcess;
  let gatewayA: NodeProcess;
  let gatewayB: NodeProcess;
  let apiUrl = '';
  let aUrl = '';
  let bUrl = '';
  let demo: { server_key: string; integration_id: string; allowed_origin: string; agent: { type: string; value: string } };
  const sockets: TestSocket[] = [];
  /** what the windows carried out, and how often each command reached one, by command id */
  const executed = new Map<number, number>();
  const received = new Map<number, number>();
  const countOn = (counts: Map<number, number>, id: number) => counts.set(id, (counts.get(id) ?? 0) + 1);
  /** A delivery reaching a window (by push or in a heartbeat answer): its runner answers with the acks. */
  const deliver = async (agent: Agent, commands: EngineCommand[]) => {
    for (const { command_id } of commands) countOn(received, command_id);
    return (await agent.runner.deliver(commands)).acks;
  };

  const rest = async (path: string, token: string, body: unknown, origin?: string) => {
    const response = await fetch(`${apiUrl}/api/v1/click2call${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(origin ? { origin } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as any };
  };
  const widgetCommand = (agent: Agent, body: Record<string, unknown>) => rest('/widget/commands', agent.widgetToken, body, demo.allowed_origin);
  const pollState = async (agent: Agent) => {
    const response = await fetch(`${apiUrl}/api/v1/click2call/widget/state`, { headers: { authorization: `Bearer ${agent.widgetToken}`, origin: demo.allowed_origin } });
    return (await response.json()) as any;
  };

  async function newAgent(simulated = false): Promise<Agent> {
    const session = await rest('/sessions', demo.server_key, { integration_id: demo.integration_id, agent: demo.agent, origin: demo.allowed_origin });
    expect(session.status).toBe(201);
    const ticket = await rest('/widget/launch-ticket', session.body.widget_token, {}, demo.allowed_origin);
    const paired = await rest('/engine/pair', '', { ticket: ticket.body.ticket, simulated });
    expect(paired.status).toBe(201);
    const beat = await rest('/engine/heartbeat', paired.body.engine_token, { state: 'ready', mic_ready: true, call_id: null });
    expect(beat.body.engine.state).toBe('ready');
    const runner = new CommandRunner((command) => void countOn(executed, command.command_id));
    return { widgetToken: session.body.widget_token, engineToken: paired.body.engine_token, runner };
  }

  /** An engine client: hands each delivery to its window's runner and acks every delivery. */
  function engineSocket(url: string, agent: Agent): TestSocket {
    const engine = openSocket(url, agent.engineToken, apiUrl, { reconnect: true });
    sockets.push(engine);
    engine.socket.on('work', async (work: { commands: EngineCommand[] }) => {
      if (work.commands.length === 0) return;
      engine.socket.emit('ack', await deliver(agent, work.commands));
    });
    return engine;
  }

  function widgetSocket(url: string, agent: Agent, reconnect = false): TestSocket {
    const widget = openSocket(url, agent.widgetToken, demo.allowed_origin, { reconnect });
    sockets.push(widget);
    return widget;
  }

  beforeAll(async () => {
    database = await createPgDatabase();
    const redisPort = await freePort();
    redis = spawnRedis(redisPort);
    await redis.start();
    const [apiPort, aPort, bPort, demoPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
    apiUrl = `http://127.0.0.1:${apiPort}`;
    aUrl = `http://127.0.0.1:${aPort}`;
    bUrl = `http://127.0.0.1:${bPort}`;
    const env = {
      DATABASE_URL: database.url,
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      C2C_DATA_DIR: dataDir,
      DEMO_PORT: String(demoPort),
      PUBLIC_BASE_URL: apiUrl,
      PUBLIC_GATEWAY_URL: aUrl,
    };
    api = spawnNode('api', ['--role', 'api', '--demo'], { ...env, PORT: String(apiPort) });
    await healthy(`${apiUrl}/healthz`);
    gatewayA = spawnNode('gateway-a', ['--role', 'gateway'], { ...env, GATEWAY_PORT: String(aPort) });
    gatewayB = spawnNode('gateway-b', ['--role', 'gateway'], { ...env, GATEWAY_PORT: String(bPort) });
    await Promise.all([healthy(`${aUrl}/healthz`), healthy(`${bUrl}/healthz`)]);
    demo = await waitFor(async () => JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8')), 'demo.json');
  }, 120_000);

  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await Promise.all([api, gatewayA, gatewayB].filter(Boolean).map((node) => node.stop()));
    await redis?.stop();
    await database?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  it('delivers a REST command handled by the api node to the engine socket on gateway B', async () => {
    const agent = await newAgent();
    const engine = engineSocket(bUrl, agent);
    await engine.next('work');
    const work = engine.next('work', { where: (w: any) => w.commands.length > 0 });
    const focus = await widgetCommand(agent, { kind: 'focus', request_id: 'focus-b-1' });
    expect(focus.body).toMatchObject({ ok: true, status: 'queued' });
    expect((await work).commands).toEqual([expect.objectContaining({ kind: 'focus', command_id: focus.body.command_id })]);
  });

  it('pushes a state change to widgets on both gateways', async () => {
    const agent = await newAgent();
    const onA = widgetSocket(aUrl, agent);
    const onB = widgetSocket(bUrl, agent);
    const [firstA, firstB] = await Promise.all([snapshotOf(onA), snapshotOf(onB)]);
    const changedA = onA.next('state', { where: (s: any) => s.version > firstA.version });
    const changedB = onB.next('state', { where: (s: any) => s.version > firstB.version });
    await widgetCommand(agent, { kind: 'availability', request_id: 'away', available: false });
    expect((await changedA).engine.available).toBe(false);
    expect((await changedB).engine.available).toBe(false);
  });

  it('exposes /metrics on both roles: sockets by kind, pushes, relayed pushes, acks, redeliveries, push latency, bus state', async () => {
    const agent = await newAgent();
    await Promise.all([widgetSocket(aUrl, agent).next('state'), engineSocket(bUrl, agent).next('work')]);
    const onA = await (await fetch(`${aUrl}/metrics`)).text();
    expect(onA).toMatch(/c2c_sockets_connected\{kind="widget"\} [1-9]/);
    expect(onA).toContain('c2c_bus_up{driver="redis"} 1');
    const onB = await (await fetch(`${bUrl}/metrics`)).text();
    expect(onB).toMatch(/c2c_sockets_connected\{kind="engine"\} [1-9]/);
    expect(onB).toMatch(/c2c_command_acks_total\{via="socket"\} [1-9]/);
    // B's sockets got the api node's pushes through Redis (the earlier tests' and these): B relayed them, the api node relayed none
    expect(onB).toMatch(/c2c_pushes_relayed_total [1-9]/);
    const apiMetrics = await (await fetch(`${apiUrl}/metrics`)).text();
    expect(apiMetrics).toMatch(/c2c_pushes_total\{kind="work"\} [1-9]/);
    expect(apiMetrics).toContain('c2c_push_latency_seconds_bucket');
    expect(apiMetrics).toContain('c2c_command_redeliveries_total');
    expect(apiMetrics).toContain('c2c_pushes_relayed_total 0');
  });

  it('survives Redis stopping and restarting: nothing crashes, REST stays right, push resumes', async () => {
    const agent = await newAgent();
    // A second widget session of the agent, on gateway A, to be revoked during the outage.
    const second = await rest('/sessions', demo.server_key, { integration_id: demo.integration_id, agent: demo.agent, origin: demo.allowed_origin });
    const engine = engineSocket(bUrl, agent);
    const revokedWidget = widgetSocket(aUrl, { ...agent, widgetToken: second.body.widget_token });
    await Promise.all([engine.next('work'), revokedWidget.next('state')]);
    await redis.stop();
    // Its ending cannot reach gateway A now: A re-checks its sockets when Redis is back.
    expect((await rest('/widget/revoke', second.body.widget_token, {}, demo.allowed_origin)).status).toBe(200);
    const ended = revokedWidget.next('ended', { timeoutMs: 40_000 });
    // During the outage the REST contract carries everything: the command is queued and the
    // heartbeat hands it over.
    const queued = await widgetCommand(agent, { kind: 'focus', request_id: 'during-outage' });
    expect(queued.body).toMatchObject({ ok: true, status: 'queued' });
    const beat = await rest('/engine/heartbeat', agent.engineToken, { state: 'ready', mic_ready: true, call_id: null });
    expect(beat.body.commands.map((c: any) => c.command_id)).toContain(queued.body.command_id);
    // Gateway B's catch-up may also send it on the socket: the window's runner carries it out once.
    const acks = await deliver(agent, beat.body.commands);
    expect(acks).toContainEqual({ command_id: queued.body.command_id, result: 'done' });
    await rest('/engine/heartbeat', agent.engineToken, { state: 'ready', mic_ready: true, call_id: null, acks });
    expect((await pollState(agent)).ok).toBe(true);
    // A socket that joins a room new to its node while Redis is away (the same window, now also on
    // gateway A): its subscription waits for Redis, through the failed reconnects of the outage.
    const joinedDuring = openSocket(aUrl, agent.engineToken, apiUrl);
    sockets.push(joinedDuring);
    await joinedDuring.next('work');
    await new Promise((resolve) => setTimeout(resolve, 3000));
    await redis.start();
    for (const node of [api, gatewayA, gatewayB]) expect(node.child.exitCode, node.output.join('')).toBeNull();
    // Push resumes once the adapters have resubscribed.
    const resumed = await waitFor(async () => {
      const work = engine.next('work', { where: (w: any) => w.commands.length > 0, timeoutMs: 1500 }).catch(() => undefined);
      await widgetCommand(agent, { kind: 'focus', request_id: `after-outage-${Date.now()}` });
      return work;
    }, 'push after Redis came back', 20_000);
    expect((resumed as any).commands.length).toBeGreaterThan(0);
    // Gateway A's connections come back on their own schedule (reconnects back off up to 2 s): a
    // push made before its subscriber is back is lost to it (and already acked on B, so no catch-up
    // sends it again).
    await waitFor(async () => ((await (await fetch(`${aUrl}/healthz`)).json()).bus === 'up' ? true : undefined), 'gateway A to be back on Redis', 10_000);
    const pushed = await widgetCommand(agent, { kind: 'focus', request_id: `after-outage-a-${Date.now()}` });
    const reachedA = (event: { event: string; payload: any }) => event.event === 'work' && event.payload.commands.some((c: any) => c.command_id === pushed.body.command_id);
    await waitFor(async () => (joinedDuring.events.some(reachedA) ? true : undefined), 'the push on gateway A', 5000);
    expect(await ended).toMatchObject({ code: 'unauthorized', final: true });
  }, 60_000);

  it("carries a call's commands from a widget on gateway A to its window on gateway B, and its hangup to the api node holding the call", async () => {
    const agent = await newAgent(true);
    const engine = engineSocket(bUrl, agent);
    await engine.next('work');
    const widget = widgetSocket(aUrl, agent);
    await snapshotOf(widget);
    const requested = await rest('/calls', demo.server_key, { integration_id: demo.integration_id, agent: demo.agent, phone_number: '+12025550123' });
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const id: string = requested.body.request_id;
    expect((await rest('/engine/claim', agent.engineToken, { request_id: id })).status).toBe(200);
    const callStatus = async () =>
      ((await (await fetch(`${apiUrl}/api/v1/click2call/calls/${id}`, { headers: { authorization: `Bearer ${demo.server_key}` } })).json()) as any).status as string;
    // the simulated far end answers 3 s after the dial
    await waitFor(async () => ((await callStatus()) === 'connected' ? true : undefined), 'the call to connect', 15_000);
    for (const command of [
      { kind: 'mute', request_id: 'call-mute' },
      { kind: 'dtmf', digits: '12#', request_id: 'call-dtmf' },
      { kind: 'unmute', request_id: 'call-unmute' },
    ]) {
      const answer = await request(widget.socket, 'command', { ...command, ref: id });
      expect(answer, JSON.stringify(command)).toMatchObject({ ok: true, status: 'queued' });
      // carried out by the window, once
      await waitFor(async () => (executed.get(answer.command_id) === 1 ? true : undefined), `${command.kind} carried out`, 10_000);
    }
    const ended = await request(widget.socket, 'command', { kind: 'hangup', request_id: 'call-hangup', ref: id });
    expect(ended).toMatchObject({ ok: true, status: 'done' });
    expect(await callStatus()).toBe('completed');
  });

  it('sends the clients of a killed node to the other node, where they get the current snapshot', async () => {
    const agent = await newAgent();
    const widget = widgetSocket(bUrl, agent);
    await widget.next('state');
    const dropped = widget.next('disconnect');
    await gatewayB.stop('SIGKILL');
    await dropped;
    await widgetCommand(agent, { kind: 'availability', request_id: 'while-down', available: false });
    const current = await pollState(agent);
    // A proxy would route the reconnect to a live node: here the client goes to A itself.
    const moved = widgetSocket(aUrl, agent);
    const snapshot = await moved.next('state');
    expect(snapshot.version).toBe(current.version);
    expect(snapshot.engine.available).toBe(false);
  });

  it('ends with an audit: every command stored once, none lost, none carried out twice', async () => {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const read = () =>
      client.query<{ id: string; request_id: string; kind: string; status: string; deliveries: number; acks: number }>(
        `SELECT id, request_id, kind, status, deliveries, acks FROM widget_commands WHERE kind IN ('focus', 'mute', 'unmute', 'dtmf') ORDER BY id`,
      );
    // The last acks are on their way: wait until no command is still outstanding (or fail below).
    await waitFor(async () => ((await read()).rows.every((row) => row.status === 'done' || row.status === 'failed') ? true : undefined), 'the last acks', 10_000).catch(() => undefined);
    const { rows } = await read();
    await client.end();
    expect(rows.length).toBeGreaterThanOrEqual(6);
    // a window's commands of every kind the tests sent: focus, and a call's
    expect(new Set(rows.map((r) => r.kind))).toEqual(new Set(['focus', 'mute', 'unmute', 'dtmf']));
    expect(new Set(rows.map((r) => r.request_id)).size).toBe(rows.length);
    for (const row of rows) {
      expect(row.status, JSON.stringify(row)).toBe('done');
      expect(row.acks).toBeGreaterThanOrEqual(1);
      // reached a window at least once, and was carried out exactly once
      expect(received.get(Number(row.id)), JSON.stringify(row)).toBeGreaterThanOrEqual(1);
      expect(executed.get(Number(row.id)), JSON.stringify(row)).toBe(1);
    }
  });

  it("on SIGTERM tells its own clients to reconnect elsewhere (a retry reason) and exits within a bound; other nodes' clients stay", async () => {
    const agent = await newAgent();
    const widget = widgetSocket(aUrl, agent);
    await widget.next('state');
    // The api node stops first (a rolling deploy): gateway A's sockets are not its to end.
    expect(await api.stop('SIGTERM')).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(widget.events.map((event) => event.event)).not.toContain('disconnect');
    expect(widget.socket.connected).toBe(true);
    const ended = widget.next('ended');
    const code = await gatewayA.stop('SIGTERM');
    expect(await ended).toMatchObject({ code: 'server_restarting', final: false });
    // 0: it finished its stop (one that outlasts STOP_DEADLINE_MS exits 1, and says so)
    expect(code).toBe(0);
  });
});
