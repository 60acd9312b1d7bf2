/**
 * The real-time gateway under a call centre's sockets (issue "Real-time gateway"). Each virtual
 * user is one agent. Its widget session and its call window (a simulated one, paired with a launch
 * ticket) are set up once; each iteration is a working spell: the agent's two sockets open, the
 * widget's from the integration's origin and the window's from the service's own pages, as
 * browsers open them; the widget sends COMMANDS commands over its socket, one every EVERY_MS
 * (`focus`: it asks the window to come to the front, and needs no call); the window receives each
 * as `work`, acks it, and the time it took is measured; then both sockets close. (In k6 an
 * iteration lasts until its sockets close, so sockets cannot outlive one: a run of several
 * iterations per agent is also a run of reconnections, each of which gets the current snapshot.)
 *
 * Metrics: c2c_snapshot_ms (handshake sent → the first `state` snapshot, widget sockets),
 * c2c_command_ack_ms (the widget's command → its ack, what POST /widget/commands would answer),
 * c2c_command_delivery_ms (the widget's command → the window's `work` carrying it),
 * c2c_socket_refusals (handshakes refused, tagged with the service's {code}).
 *
 *   k6 run -e SERVER_KEY=c2ck_… -e AGENTS=200 -e COMMANDS=60 loadtest/k6/push.js
 *
 * Behind a proxy, the gateway's address comes from the session's `realtime` (PUBLIC_GATEWAY_URL).
 */
import { check, fail } from 'k6';
import { Counter, Trend } from 'k6/metrics';
import { setTimeout } from 'k6/timers';
import { agentOf, config, count } from './lib/config.js';
import * as api from './lib/api.js';
import { connect } from './lib/socketio.js';

const COMMANDS = count('COMMANDS', 10);
/** pause between an agent's commands */
const EVERY_MS = count('EVERY_MS', 1000);
/** working spells per agent */
const SPELLS = count('SPELLS', 1);
const ANSWER_MS = 10000;

export const options = {
  scenarios: {
    sockets: { executor: 'per-vu-iterations', vus: config.agents, iterations: SPELLS, maxDuration: '30m' },
  },
  thresholds: {
    checks: ['rate>0.99'],
    c2c_socket_refusals: ['count<1'],
    c2c_command_delivery_ms: ['p(99)<250'],
  },
};

const snapshot = new Trend('c2c_snapshot_ms', true);
const commandAck = new Trend('c2c_command_ack_ms', true);
const delivery = new Trend('c2c_command_delivery_ms', true);
const refusals = new Counter('c2c_socket_refusals');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** This virtual user's agent: its widget token and its window's engine token, made once. */
let desk = null;

async function sitDown(agent) {
  const session = await api.createSession(agent);
  if (!session.ok) fail(`no widget session for ${agent.value} (${session.body && session.body.error}): see loadtest/k6/README.md`);
  const { widget_token: widgetToken, realtime } = session.body;
  if (!realtime.available) fail('the service says push is not available (no gateway): see the README, "Roles and ports"');
  const ticket = await api.launchTicket(widgetToken);
  if (!ticket.ok) fail('no launch ticket');
  const paired = await api.pairSimulatedWindow(ticket.body.ticket);
  if (!paired.ok) fail(`the window did not pair (${paired.body && paired.body.error})`);
  // The window runs on the service's own pages: its socket comes from there.
  const siteOrigin = ticket.body.window_url.match(/^[a-z]+:\/\/[^/]+/i)[0];
  return { widgetToken, realtime, engineToken: paired.body.engine_token, engineRealtime: paired.body.realtime, siteOrigin };
}

async function open(realtime, token, origin) {
  try {
    return await connect(realtime, token, origin, ANSWER_MS);
  } catch (refusal) {
    refusals.add(1, { code: String(refusal.code) });
    fail(`the gateway refused the handshake: ${refusal.code} ${refusal.message || ''}`);
  }
}

/** The window's socket: it reports ready, and acks every command pushed to it. */
async function openWindow(received) {
  const engine = await open(desk.engineRealtime, desk.engineToken, desk.siteOrigin);
  engine.on('work', (work) => {
    const acks = [];
    for (const command of work.commands) {
      received(command.command_id, Date.now());
      acks.push({ command_id: command.command_id, result: 'done' });
    }
    if (acks.length > 0) engine.emit('ack', acks);
  });
  let ready;
  try {
    ready = await engine.request('heartbeat', { state: 'ready', mic_ready: true, busy: false, muted: false, call_id: null, acks: [] }, ANSWER_MS);
  } catch (error) {
    engine.close(); // k6 abandons what an iteration that failed left open: closed here, the gateway hears it
    throw error;
  }
  check(ready, { 'the window is ready after a heartbeat over its socket': (b) => !!b && b.ok === true && !!b.engine && b.engine.state === 'ready' });
  return engine;
}

/** The widget's socket, once its snapshot came (null if none came in ANSWER_MS). */
async function openWidget() {
  let first = null;
  const started = Date.now();
  const widget = await open(desk.realtime, desk.widgetToken, config.origin);
  widget.on('state', (state) => {
    if (first === null) first = state;
  });
  while (first === null && Date.now() - started < ANSWER_MS) await sleep(5);
  const got = check(first, { 'the widget gets its snapshot on connect, with the window ready': (s) => !!s && !!s.engine && s.engine.state === 'ready' });
  if (got) snapshot.add(Date.now() - started);
  return widget;
}

export default async function () {
  if (!desk) desk = await sitDown(agentOf(__VU));
  const arrivals = {}; // command_id → when the window received it
  let engine = null;
  let widget = null;
  try {
    engine = await openWindow((commandId, at) => {
      arrivals[commandId] = at;
    });
    widget = await openWidget();
    for (let n = 0; n < COMMANDS; n += 1) {
      const sentAt = Date.now();
      const answer = await widget.request('command', { kind: 'focus', request_id: `k6-${__VU}-${__ITER}-${n}-${sentAt}` }, ANSWER_MS);
      commandAck.add(Date.now() - sentAt);
      if (check(answer, { 'a command over the socket is accepted': (a) => !!a && a.ok === true && typeof a.command_id === 'number' })) {
        while (arrivals[answer.command_id] === undefined && Date.now() - sentAt < ANSWER_MS) await sleep(1);
        const at = arrivals[answer.command_id];
        if (check(at, { 'the window receives the command by push': (t) => t !== undefined })) delivery.add(at - sentAt);
      }
      if (n < COMMANDS - 1) await sleep(EVERY_MS);
    }
  } finally {
    if (widget) widget.close();
    if (engine) engine.close();
  }
}
