/**
 * The REST calls a load script makes, as the integrator's backend (server key), the agent's widget
 * (widget token, from the integration's origin) and the call window (engine token) make them.
 * Each answer is checked against the status the contract gives; a different one is a failed check
 * named after the request, with the service's error code in the log.
 */
import http from 'k6/http';
import { check } from 'k6';
import { config } from './config.js';

const json = (body) => (body === undefined ? null : JSON.stringify(body));

/** One response callback per set of expected statuses (k6 advises against making one per request). */
const callbacks = {};
function expected(statuses) {
  const key = statuses.join(',');
  if (!callbacks[key]) callbacks[key] = http.expectedStatuses.apply(null, statuses);
  return callbacks[key];
}

/** A header of a k6 response, whatever case the server or k6 gave its name. */
export function header(response, name) {
  const wanted = name.toLowerCase();
  for (const key of Object.keys(response.headers || {})) if (key.toLowerCase() === wanted) return response.headers[key];
  return undefined;
}

function body(response) {
  try {
    return JSON.parse(response.body);
  } catch (_) {
    return null;
  }
}

/**
 * One request; `expect` lists the statuses that mean success. Answers `{status, body, response}`;
 * `body` is the parsed JSON (null for 304 or a non-JSON body).
 */
export async function request(name, method, path, { token, origin, payload, headers, expect }) {
  const params = {
    headers: Object.assign({}, headers || {}, token ? { Authorization: `Bearer ${token}` } : {}, origin ? { Origin: origin } : {}, payload === undefined ? {} : { 'Content-Type': 'application/json' }),
    tags: { name },
    responseCallback: expected(expect),
  };
  const response = await http.asyncRequest(method, `${config.baseUrl}${path}`, json(payload), params);
  const parsed = body(response);
  const ok = check(response, { [`${name}: ${expect.join(' or ')}`]: (r) => expect.indexOf(r.status) !== -1 });
  if (!ok) console.warn(`${name}: ${response.status} ${parsed && parsed.error ? `${parsed.error}: ${parsed.message}` : String(response.error || '')}`);
  return { ok, status: response.status, body: parsed, response };
}

/** The integrator's backend: a widget session for an agent (spec: POST /sessions). */
export function createSession(agent) {
  return request('POST /sessions', 'POST', '/sessions', {
    token: config.serverKey,
    payload: { integration_id: config.integrationId, agent, origin: config.origin },
    expect: [201],
  });
}

/** The integrator's backend: a call for an agent, idempotent by key (spec: POST /calls). */
export function requestCall(agent, phoneNumber, idempotencyKey, contactReference) {
  return request('POST /calls', 'POST', '/calls', {
    token: config.serverKey,
    headers: { 'Idempotency-Key': idempotencyKey },
    payload: { integration_id: config.integrationId, agent, phone_number: phoneNumber, contact_reference: contactReference },
    expect: [200, 202],
  });
}

export function readCall(callId) {
  return request('GET /calls/{id}', 'GET', `/calls/${encodeURIComponent(callId)}`, { token: config.serverKey, expect: [200] });
}

/** The widget: its state, conditional on the version it holds (200 with a new one, or 304). */
export function widgetState(widgetToken, etag) {
  return request('GET /widget/state', 'GET', '/widget/state', {
    token: widgetToken,
    origin: config.origin,
    headers: etag ? { 'If-None-Match': etag } : {},
    expect: [200, 304],
  });
}

export function widgetCommand(widgetToken, command) {
  return request(`POST /widget/commands ${command.kind}`, 'POST', '/widget/commands', { token: widgetToken, origin: config.origin, payload: command, expect: [200] });
}

export function launchTicket(widgetToken) {
  return request('POST /widget/launch-ticket', 'POST', '/widget/launch-ticket', { token: widgetToken, origin: config.origin, payload: {}, expect: [200] });
}

/**
 * A simulated call window (docs/simulated-provider.md): it needs no microphone, and the service's
 * telephony simulator carries its calls, so a load run dials nobody.
 */
export function pairSimulatedWindow(ticket) {
  return request('POST /engine/pair', 'POST', '/engine/pair', { payload: { ticket, simulated: true, client: 'window' }, expect: [201] });
}

export function heartbeat(engineToken, report) {
  return request('POST /engine/heartbeat', 'POST', '/engine/heartbeat', { token: engineToken, payload: report, expect: [200] });
}

export function claim(engineToken, requestId) {
  return request('POST /engine/claim', 'POST', '/engine/claim', { token: engineToken, payload: { request_id: requestId }, expect: [200] });
}

export function closeWindow(engineToken) {
  return request('POST /engine/close', 'POST', '/engine/close', { token: engineToken, payload: { reason: 'unload' }, expect: [200] });
}
