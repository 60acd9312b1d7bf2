/**
 * Parts (b), (c), (d) of npm run bench:push, one server after the other with the same client
 * processes and the same N: the baselines first (raw uWS, Socket.IO on uWS with nothing of ours,
 * Socket.IO on Node http), then our gateway. Our gateway
 * goes last so that, by then, the API's reaper has marked every engine of part (a) offline (90 s
 * without a heartbeat): those version bumps would otherwise push states in the middle of its
 * memory, restart and broadcast measurements. Engines do not heartbeat during these parts.
 */
import { join } from 'node:path';
import pg from 'pg';
import { DEMO } from '../../api/demo/seed.js';
import type { Pool } from './pool.js';
import { ROOT, startProc, type Proc } from './procs.js';
import type { Target } from './protocol.js';
import type { Comparison, ServerResult } from './report.js';
import { freshStorm, gatewayStorm, measureBroadcast, measureMemory, restPushes } from './single-node.js';
import { freePort, readyAgent, restClient, startGatewayNode, type Demo, type ReadyAgent, type StackEnv } from './stack.js';
import { sleep, type OtherPids } from './stats.js';

export interface CompareOptions {
  sockets: number;
  inflight: number;
  broadcastRate: number;
  broadcastSeconds: number;
  /** which of b, c, d to run (the baselines' memory is always measured: their sockets are opened anyway) */
  parts: string;
  api: Proc;
  pidsOf: () => Promise<OtherPids>;
}

export async function compare(env: StackEnv, pool: Pool, agents: ReadyAgent[], demo: Demo, options: CompareOptions): Promise<Comparison> {
  const { sockets, inflight } = options;
  const split = <T>(items: T[]) => Array.from({ length: pool.size }, (_, w) => items.filter((_, i) => i % pool.size === w));
  const warmCount = Math.min(50, sockets);

  // The broadcast payload: the demo agent's WidgetState as a push carries it (no session_expires_at).
  const rest = restClient(env.apiPort);
  const demoAgent = await readyAgent(rest, demo, { id: DEMO.agent.id, email: DEMO.agent.email });
  const stateRes = await fetch(`http://127.0.0.1:${env.apiPort}/api/v1/click2call/widget/state`, {
    headers: { authorization: `Bearer ${demoAgent.widgetToken}`, origin: demo.allowed_origin },
  });
  const { session_expires_at: _session, ...state } = (await stateRes.json()) as Record<string, unknown>;
  const stateJson = JSON.stringify(state);
  const packet = `42${JSON.stringify(['state', state])}`;
  const payloadBytes = Buffer.byteLength(packet);

  // — the baselines: raw uWS, Socket.IO on uWS with nothing of ours, Socket.IO on Node http —
  const baselines = {
    uws: { name: 'raw uWS', proc: 'uws-baseline', script: 'uws-server.ts', native: true },
    'sio-uws': { name: 'Socket.IO on uWS, bare', proc: 'socketio-uws-baseline', script: 'sio-uws-server.ts', native: true },
    sio: { name: 'Socket.IO on Node http', proc: 'socketio-baseline', script: 'sio-server.ts', native: false },
  } as const;
  const baseline = async (kind: keyof typeof baselines): Promise<ServerResult> => {
    const { name, script, native } = baselines[kind];
    const proc = startProc({
      name: baselines[kind].proc,
      args: [join(ROOT, 'loadtest', 'push', script)],
      env: { PORT: '0' },
      nodeFlags: ['--expose-gc'],
      logDir: env.logDir,
    });
    const line = await proc.waitFor(/^listening \d+/, 30_000);
    if (native && !line.includes('native=true')) throw new Error(`${name} baseline is not on native uWS: ${line}`);
    const base = `${kind === 'uws' ? 'ws' : 'http'}://127.0.0.1:${line.split(' ')[1]}`;
    // Both Socket.IO baselines take the same plain Socket.IO client (no auth, no snapshot).
    const targets: Target[] = Array.from({ length: sockets }, (_, i) => ({ kind: kind === 'uws' ? 'uws' : 'sio', url: base, agent: i }));
    const out: ServerResult = {};
    console.log(`  (c) ${name}: ${sockets} sockets …`);
    out.memory = await measureMemory(proc, pool, split(targets), split(targets.slice(0, warmCount)), inflight);
    console.log(`      ${out.memory.per_connection_bytes} B per connection (RSS), up in ${out.memory.connect.seconds} s`);
    if (options.parts.includes('b')) {
      out.broadcast = await measureBroadcast(proc, pool, { rate: options.broadcastRate, seconds: options.broadcastSeconds, members: out.memory.sockets, payloadBytes, pidsOf: options.pidsOf }, () =>
        proc.control({ op: 'broadcast', rate: options.broadcastRate, seconds: options.broadcastSeconds, payload: packet, state: stateJson }),
      );
      console.log(`  (b) ${name}: ${out.broadcast.delivered}/${out.broadcast.expected_deliveries} delivered, ${out.broadcast.per_message_us_net} µs CPU per message (net)`);
    }
    if (options.parts.includes('d')) {
      out.storm = await freshStorm(pool, inflight, sockets);
      console.log(`  (d) ${name}: ${out.storm.opened} fresh connections in ${out.storm.seconds} s`);
    }
    await pool.close();
    await proc.stop();
    return out;
  };
  const uws = await baseline('uws');
  const sioUws = await baseline('sio-uws');
  const sio = await baseline('sio');

  // — our gateway: one node, fed by the API node over Redis as in production —
  const quiet = await enginesOffline(env.databaseUrl, 150_000);
  console.log(`  every engine offline (no more reaper pushes): ${quiet ? 'yes' : 'NO, waited 150 s'}`);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let gateway = await startGatewayNode(env, 'gateway-solo', port);
  const agentTargets: Target[] = agents.flatMap((agent, i): Target[] => [
    { kind: 'widget', url, agent: i, token: agent.widgetToken, origin: demo.allowed_origin },
    { kind: 'engine', url, agent: i, token: agent.engineToken, origin: demo.site_url },
  ]);
  const gw: ServerResult = {};
  const agentParts = /[cd]/.test(options.parts);
  if (agentParts) {
    console.log(`  (c) gateway: ${agentTargets.length} sockets (${agents.length} widgets + ${agents.length} engines, distinct agents) …`);
    gw.memory = await measureMemory(gateway, pool, split(agentTargets), split(agentTargets.slice(0, warmCount)), inflight);
    console.log(`      ${gw.memory.per_connection_bytes} B per connection (RSS), ${gw.memory.connect.opened} up in ${gw.memory.connect.seconds} s`);
  }
  if (agentParts && options.parts.includes('d')) {
    await sleep(1000);
    console.log(`  (d) gateway: restart under ${agentTargets.length} clients …`);
    gw.storm = await gatewayStorm(
      pool,
      {
        stop: () => gateway.stop(),
        start: async () => {
          gateway = await startGatewayNode(env, 'gateway-solo-restarted', port);
          return [options.api, gateway];
        },
      },
      { inflight, sockets: agentTargets.length, databaseUrl: env.databaseUrl, memberOf: (i) => agents[i]!.memberId, pidsOf: options.pidsOf },
    );
    console.log(`      ${gw.storm.opened} back in ${gw.storm.seconds} s after the new process listened (${gw.storm.from_restart_s} s from SIGTERM); ${JSON.stringify(gw.storm.snapshots)}`);
  }
  await pool.close();

  if (options.parts.includes('b')) {
    // The broadcast room: N widget sockets of the demo agent; each availability command pushes its state.
    const room: Target[] = Array.from({ length: sockets }, (_, i) => ({ kind: 'widget', url, agent: -1 - i, token: demoAgent.widgetToken, origin: demo.allowed_origin }));
    console.log(`  (b) gateway: ${sockets} widget sockets of one agent, ${options.broadcastRate} state pushes/s for ${options.broadcastSeconds} s …`);
    const before = await gateway.probe(true);
    const opened = await pool.open(split(room), inflight, 300_000);
    await sleep(2000);
    const after = await gateway.probe(true);
    gw.memory_one_agent = {
      per_connection_bytes: Math.round((after.rss - before.rss) / Math.max(1, opened.opened)),
      heap_per_connection_bytes: Math.round((after.heap_used - before.heap_used) / Math.max(1, opened.opened)),
    };
    gw.broadcast = await measureBroadcast(
      gateway,
      pool,
      { rate: options.broadcastRate, seconds: options.broadcastSeconds, members: opened.opened, payloadBytes, pidsOf: options.pidsOf },
      restPushes(env.apiPort, demoAgent.widgetToken, demo.allowed_origin, options.broadcastRate, options.broadcastSeconds, opened.opened),
    );
    console.log(`      ${gw.broadcast.delivered}/${gw.broadcast.expected_deliveries} delivered, ${gw.broadcast.per_message_us_net} µs CPU per message (net)`);
    await pool.close();
  }
  await gateway.stop();
  return { sockets, gateway: gw, uws, sio_uws: sioUws, sio };
}

/** Waits until the reaper has marked every engine offline (none left enabling or ready). */
async function enginesOffline(databaseUrl: string, timeoutMs: number): Promise<boolean> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      const { rows } = await client.query(`SELECT count(*)::int AS live FROM engines WHERE state IN ('enabling', 'ready')`);
      if ((rows[0] as { live: number }).live === 0) return true;
      if (performance.now() > deadline) return false;
      await sleep(1000);
    }
  } finally {
    await client.end();
  }
}
