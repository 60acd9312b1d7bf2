/** Steps of the call flow over HTTP, shared by the lifecycle suites. */
import { expect } from 'vitest';
import type { Client } from './harness.js';
import { ORIGIN, type Tenant } from './tenant.js';

export interface Agent {
  widgetToken: string;
  engineToken: string;
  engineId: string;
}

export async function openSession(api: Client, t: Tenant, email = t.agent.email): Promise<string> {
  const res = await api.post('/sessions', { integration_id: t.integrationId, agent: { type: 'email', value: email }, origin: ORIGIN }, { auth: t.serverKey });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.widget_token;
}

export async function launchTicket(api: Client, widgetToken: string): Promise<string> {
  const res = await api.post('/widget/launch-ticket', undefined, { auth: widgetToken, origin: ORIGIN });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.ticket;
}

export const READY = { state: 'ready', mic_ready: true, busy: false, muted: false, call_id: null } as const;

export function heartbeat(api: Client, engineToken: string, report: Record<string, unknown> = {}) {
  return api.post('/engine/heartbeat', { ...READY, ...report }, { auth: engineToken });
}

/** Session → ticket → pair (simulated, unless told otherwise) → voice token → ready heartbeat. */
export async function readyAgent(api: Client, t: Tenant, email = t.agent.email, simulated = true): Promise<Agent> {
  const widgetToken = await openSession(api, t, email);
  const ticket = await launchTicket(api, widgetToken);
  const paired = await api.post('/engine/pair', { ticket, simulated });
  expect(paired.status, JSON.stringify(paired.body)).toBe(201);
  expect(paired.body.engine.simulated).toBe(simulated);
  const engineToken = paired.body.engine_token;
  expect((await api.post('/engine/voice-token', undefined, { auth: engineToken })).status).toBe(200);
  const beat = await heartbeat(api, engineToken);
  expect(beat.status, JSON.stringify(beat.body)).toBe(200);
  expect(beat.body.engine.state).toBe('ready');
  return { widgetToken, engineToken, engineId: paired.body.engine.id };
}

export function requestCall(api: Client, t: Tenant, body: Record<string, unknown> = {}, key?: string) {
  return api.post(
    '/calls',
    { integration_id: t.integrationId, agent: { type: 'email', value: t.agent.email }, phone_number: '+12025550123', ...body },
    { auth: t.serverKey, headers: key ? { 'idempotency-key': key } : {} },
  );
}

export function widgetState(api: Client, widgetToken: string) {
  return api.get('/widget/state', { auth: widgetToken, origin: ORIGIN });
}

export function command(api: Client, widgetToken: string, body: Record<string, unknown>) {
  return api.post('/widget/commands', body, { auth: widgetToken, origin: ORIGIN });
}
