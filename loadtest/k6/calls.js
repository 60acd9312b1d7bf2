/**
 * A call centre's shift over REST only: the contract every client falls back to when its socket
 * is down (spec section 4). Each virtual user is one agent: the integrator's backend opens the
 * agent's widget session, the agent's call window (a simulated one: the service's telephony
 * simulator carries the audio, so nobody is dialed) pairs with a launch ticket and heartbeats,
 * and the widget polls its state at poll_ms with If-None-Match. Each iteration is one call:
 *
 *   1. the backend asks for a call with an Idempotency-Key, then sends the same request again,
 *      as a backend retrying a timed-out request would: both answers name the same call;
 *   2. the window picks up the dial request from its next heartbeat (every heartbeat_fallback_ms,
 *      as a window without its socket heartbeats) and claims it;
 *   3. the simulator rings, answers after 3 s, and the far end hangs up CALL_SECONDS later
 *      (a magic number, docs/simulated-provider.md); once the widget sees it connected, it mutes
 *      and unmutes the call and sends a DTMF digit, which the window receives in its next
 *      heartbeat and acks in the one after;
 *   4. the widget sees the call end `completed`, and the backend reads it back, billed.
 *
 * Metrics (beside k6's own): c2c_call_setup_ms (POST /calls → the window's claim answered),
 * c2c_widget_sees_connected_ms (POST /calls → the widget's first state with the call connected),
 * c2c_command_pickup_ms (a widget command → the heartbeat that hands it to the window),
 * c2c_calls_completed / c2c_calls_failed.
 *
 *   k6 run -e SERVER_KEY=c2ck_… -e AGENTS=50 -e CALLS=5 loadtest/k6/calls.js
 *
 * See loadtest/k6/README.md for the agents and limits a run needs.
 */
import { check, fail } from 'k6';
import { Counter, Trend } from 'k6/metrics';
import { setTimeout } from 'k6/timers';
import { agentOf, config, count } from './lib/config.js';
import * as api from './lib/api.js';

const CALLS = count('CALLS', 3);
/** +1202555 02NN: answers after 3 s, the far end hangs up NN s later (01–99) */
const CALL_SECONDS = count('CALL_SECONDS', 15);
if (CALL_SECONDS > 99) throw new Error('CALL_SECONDS must be 1–99 (the simulator\'s magic numbers)');
const PHONE = `+120255502${String(CALL_SECONDS).padStart(2, '0')}`;
/** pause between an agent's calls */
const WRAP_UP_MS = count('WRAP_UP_MS', 1000);
const ENDED = ['completed', 'rejected', 'busy', 'no_answer', 'canceled', 'failed', 'expired'];

export const options = {
  scenarios: {
    shift: { executor: 'per-vu-iterations', vus: config.agents, iterations: CALLS, maxDuration: '30m' },
  },
  thresholds: {
    checks: ['rate>0.99'],
    http_req_failed: ['rate<0.01'],
    c2c_calls_failed: ['count<1'],
    c2c_call_setup_ms: ['p(95)<5000'],
  },
};

const callSetup = new Trend('c2c_call_setup_ms', true);
const widgetSeesConnected = new Trend('c2c_widget_sees_connected_ms', true);
const commandPickup = new Trend('c2c_command_pickup_ms', true);
const completed = new Counter('c2c_calls_completed');
const failed = new Counter('c2c_calls_failed');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** This virtual user's agent: its widget and its call window, set up on the first iteration. */
let desk = null;

/** The agent sits down: a widget session, a launch ticket, a paired window reporting ready. */
async function sitDown(agent) {
  const session = await api.createSession(agent);
  if (!session.ok) fail(`no widget session for ${agent.value} (${session.body && session.body.error}): see loadtest/k6/README.md`);
  const widgetToken = session.body.widget_token;
  const ticket = await api.launchTicket(widgetToken);
  if (!ticket.ok) fail('no launch ticket');
  const paired = await api.pairSimulatedWindow(ticket.body.ticket);
  if (!paired.ok) fail(`the window did not pair (${paired.body && paired.body.error})`);
  const window = { token: paired.body.engine_token, everyMs: paired.body.heartbeat_fallback_ms, acks: [], callId: null, lastBeat: 0 };
  const first = await api.heartbeat(window.token, report(window));
  check(first.body, { 'the window is ready after its first heartbeat': (b) => b !== null && !!b.engine && b.engine.state === 'ready' });
  const state = await api.widgetState(widgetToken);
  // refused (a 429 on a large run): sat down again next iteration, not left never polling, once the
  // wait the service asked for is over (at once, it would only add to what is being refused)
  if (!state.ok) {
    await sleep((Number(api.header(state.response, 'Retry-After')) || 3) * 1000);
    fail(`the widget's first poll was refused (${state.body && state.body.error})`);
  }
  return { agent, widgetToken, window, etag: api.header(state.response, 'ETag'), pollMs: state.body.poll_ms, lastPoll: Date.now() };
}

function report(window) {
  return { state: 'ready', mic_ready: true, busy: false, muted: false, call_id: window.callId, acks: window.acks.splice(0) };
}

/** One heartbeat: acks what the last one handed over, and answers the work it carries. */
async function beat(window, onCommand) {
  window.lastBeat = Date.now();
  const answer = await api.heartbeat(window.token, report(window));
  if (!answer.ok) return [];
  for (const command of answer.body.commands) {
    onCommand(command);
    window.acks.push({ command_id: command.command_id, result: 'done' });
  }
  return answer.body.dial_requests;
}

/** A poll as the SDK polls: conditional on the version it holds. */
async function poll() {
  desk.lastPoll = Date.now();
  const answer = await api.widgetState(desk.widgetToken, desk.etag);
  if (answer.status === 200) {
    desk.etag = api.header(answer.response, 'ETag');
    return answer.body;
  }
  return null;
}

export default async function () {
  if (!desk) desk = await sitDown(agentOf(__VU));
  const { window } = desk;
  const key = `k6-${__VU}-${__ITER}-${Date.now()}`;

  const askedAt = Date.now();
  const first = await api.requestCall(desk.agent, PHONE, key, `k6 vu ${__VU} call ${__ITER}`);
  if (!first.ok) {
    failed.add(1);
    return sleep(WRAP_UP_MS);
  }
  const callId = first.body.call_id;
  const retried = await api.requestCall(desk.agent, PHONE, key, `k6 vu ${__VU} call ${__ITER}`);
  check(retried, { 'a retried POST /calls answers 200 with the same call': (r) => r.status === 200 && r.body.call_id === callId });

  const sent = {}; // command_id → when the widget sent it
  const pickedUp = (command) => {
    const at = sent[command.command_id];
    if (at) commandPickup.add(Date.now() - at);
  };
  let status = first.body.status;
  let seenConnected = false;

  const deadline = askedAt + (CALL_SECONDS + 60) * 1000;

  while (ENDED.indexOf(status) === -1 && Date.now() < deadline) {
    if (Date.now() - window.lastBeat >= window.everyMs) {
      const requests = await beat(window, (command) => pickedUp(command));
      for (const dial of requests) {
        if (dial.request_id !== callId) continue;
        const claimed = await api.claim(window.token, callId);
        if (claimed.ok) {
          window.callId = callId;
          callSetup.add(Date.now() - askedAt);
        }
      }
    }
    if (Date.now() - desk.lastPoll >= desk.pollMs) {
      const state = await poll();
      if (state && state.call && state.call.call_id === callId) {
        status = state.call.status;
        if (status === 'connected' && !seenConnected) {
          seenConnected = true;
          widgetSeesConnected.add(Date.now() - askedAt);
          // The agent's hands on the call: each command goes to the window in its next heartbeat.
          for (const kind of ['mute', 'unmute', 'dtmf']) {
            const at = Date.now();
            const result = await api.widgetCommand(desk.widgetToken, { kind, request_id: `${key}-${kind}`, digits: kind === 'dtmf' ? '1' : undefined });
            if (result.ok) sent[result.body.command_id] = at;
          }
        }
      }
    }
    await sleep(100);
  }
  window.callId = null;
  // The window acks what its last heartbeat handed over in its next one, as a window does after a call.
  if (window.acks.length > 0) await beat(window, pickedUp);

  const read = await api.readCall(callId);
  const good = check(read.body, {
    'the call ends completed': (b) => b !== null && b.status === 'completed',
    'the widget saw it connected': () => seenConnected,
    'a completed call has its duration': (b) => b !== null && b.duration >= CALL_SECONDS - 1,
  });
  (good ? completed : failed).add(1);
  await sleep(WRAP_UP_MS);
}
