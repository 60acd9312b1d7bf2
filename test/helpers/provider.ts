/** Playing the voice provider in API suites: signed webhooks, and a real (non-simulated) window whose calls the test drives. */
import { expect } from 'vitest';
import { PROVIDER_PATHS } from '../../api/providers/twiml.js';
import { signWebhook, type WebhookParams } from '../../api/providers/signature.js';
import { readyAgent, requestCall, type Agent } from './flows.js';
import type { Client, Harness } from './harness.js';
import type { Tenant } from './tenant.js';

export const VOICE_PATH = PROVIDER_PATHS.voice;
export const statusPath = (intentId: string) => `${PROVIDER_PATHS.status}?intent=${encodeURIComponent(intentId)}`;
export const ringEndedPath = (intentId: string) => `${PROVIDER_PATHS.ringEnded}?intent=${encodeURIComponent(intentId)}`;

/** Webhooks as the provider sends them to the harness's app (both are read when called: suites assign them in beforeAll). */
export function providerWebhooks(harness: () => Harness, api: () => Client) {
  async function authTokenOf(accountId: string): Promise<string> {
    const [row] = await harness().services.db.query<{ provider_auth_token: string }>('SELECT provider_auth_token FROM accounts WHERE id = $1', [accountId]);
    return row!.provider_auth_token;
  }
  /** The signature the provider sends for path (with its query) under the configured public URL. */
  const sign = (authToken: string, path: string, params: WebhookParams) => signWebhook(authToken, harness().config.publicBaseUrl + path, params);
  /** A form-encoded provider webhook; signature undefined sends no X-Twilio-Signature header. */
  function postWebhook(path: string, params: WebhookParams, signature: string | undefined, extraHeaders: Record<string, string> = {}) {
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', ...extraHeaders };
    if (signature !== undefined) headers['x-twilio-signature'] = signature;
    return api().post(`/${path}`, undefined, { raw: new URLSearchParams(params).toString(), headers });
  }
  const signed = async (t: Tenant, path: string, params: WebhookParams) => postWebhook(path, params, sign(await authTokenOf(t.accountId), path, params));
  return {
    authTokenOf,
    sign,
    postWebhook,
    signedVoice: (t: Tenant, params: WebhookParams) => signed(t, VOICE_PATH, params),
    signedStatus: (t: Tenant, intentId: string, params: WebhookParams) => signed(t, statusPath(intentId), params),
    /** Twilio's incoming webhook: a call to one of the integration's numbers */
    signedIncoming: (t: Tenant, params: WebhookParams) => signed(t, PROVIDER_PATHS.incoming, params),
    /** the incoming <Dial>'s action: a ring of this intent ended */
    signedRingEnded: (t: Tenant, intentId: string, params: WebhookParams) => signed(t, ringEndedPath(intentId), params),
  };
}

/** A real (non-simulated) window, ready: the test plays the provider. */
export function realAgent(api: Client, t: Tenant): Promise<Agent> {
  return readyAgent(api, t, t.agent.email, false);
}

/** POST /calls then POST /engine/claim; answers the request id. */
export async function requestAndClaim(api: Client, t: Tenant, agent: Agent, body: Record<string, unknown> = {}): Promise<string> {
  const requested = await requestCall(api, t, body);
  expect(requested.status, JSON.stringify(requested.body)).toBe(202);
  const id: string = requested.body.request_id;
  const claimed = await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
  expect(claimed.status, JSON.stringify(claimed.body)).toBe(200);
  return id;
}
