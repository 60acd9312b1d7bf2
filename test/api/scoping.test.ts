/**
 * Every lookup is scoped to the credential's own integration and agent (spec section 5): another
 * integration's server key, widget token or call window neither sees nor touches a call, and one
 * Idempotency-Key used by two integrations names two calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMember } from '../../api/domain/operator/accounts.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { command, readyAgent, requestCall, widgetState, type Agent } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('scoping on %s', (driver) => {
  let h: Harness;
  let api: Client;
  let a: Tenant;
  let b: Tenant;
  let onA: Agent;
  let onB: Agent;

  beforeAll(async () => {
    h = await createHarness(driver);
    api = client(h.app);
    a = await seedTenant(h.services);
    b = await seedTenant(h.services);
    onA = await readyAgent(api, a);
    onB = await readyAgent(api, b);
  });
  afterAll(() => h.close());

  const statusOn = async (t: Tenant, id: string) => {
    const read = await api.get(`/calls/${id}`, { auth: t.serverKey });
    expect(read.status, JSON.stringify(read.body)).toBe(200);
    return read.body.status as string;
  };

  it("answers another integration's call as no such call, to its server key, its widgets and its windows, and leaves it as it was", async () => {
    const requested = await requestCall(api, b);
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const id = requested.body.request_id as string;

    await expectError(api.get(`/calls/${id}`, { auth: a.serverKey }), 404, 'not_found');
    await expectError(api.post(`/calls/${id}/hangup`, undefined, { auth: a.serverKey }), 404, 'not_found');
    await expectError(api.post('/engine/claim', { request_id: id }, { auth: onA.engineToken }), 404, 'not_found');
    // answered as for no call at all: nothing tells that the call exists
    await expectError(command(api, onA.widgetToken, { kind: 'hangup', request_id: 'a-hangs-up-b', ref: id }), 409, 'invalid_state');
    expect((await widgetState(api, onA.widgetToken)).body.call?.request_id).not.toBe(id);

    expect(await statusOn(b, id)).toBe('queued');
    expect((await widgetState(api, onB.widgetToken)).body.call).toMatchObject({ request_id: id, status: 'queued' });
    expect((await api.post(`/calls/${id}/hangup`, undefined, { auth: b.serverKey })).status).toBe(200);
  });

  it('takes one Idempotency-Key from two integrations as two calls, each its own', async () => {
    const fromA = await requestCall(api, a, {}, 'shared-key-1');
    const fromB = await requestCall(api, b, {}, 'shared-key-1');
    expect([fromA.status, fromB.status], JSON.stringify([fromA.body, fromB.body])).toEqual([202, 202]);
    expect(fromA.body.request_id).not.toBe(fromB.body.request_id);
    // each replay answers its own integration's call
    expect((await requestCall(api, a, {}, 'shared-key-1')).body.request_id).toBe(fromA.body.request_id);
    expect((await requestCall(api, b, {}, 'shared-key-1')).body.request_id).toBe(fromB.body.request_id);
    for (const [t, id] of [[a, fromA.body.request_id], [b, fromB.body.request_id]] as const) {
      expect((await api.post(`/calls/${id}/hangup`, undefined, { auth: t.serverKey })).status).toBe(200);
    }
  });

  it("lets an agent's widget and window act on the agent's own call only, not on a colleague's of the same integration", async () => {
    const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
    const colleague = await createMember(deps, { accountId: a.accountId, email: 'colleague@acme.example', name: 'Colleague', departmentId: a.salesId });
    const other = await readyAgent(api, a, colleague.email);
    const requested = await requestCall(api, a, { agent: { type: 'email', value: colleague.email } });
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const id = requested.body.request_id as string;
    await expectError(command(api, onA.widgetToken, { kind: 'hangup', request_id: 'not-my-call', ref: id }), 409, 'invalid_state');
    await expectError(api.post('/engine/claim', { request_id: id }, { auth: onA.engineToken }), 404, 'not_found');
    expect((await widgetState(api, onA.widgetToken)).body.call?.request_id).not.toBe(id);
    expect(await statusOn(a, id)).toBe('queued');
    expect((await widgetState(api, other.widgetToken)).body.call).toMatchObject({ request_id: id, status: 'queued' });
    // ended, it is still no call of A's: A's hang up of it is not taken as done
    expect((await api.post(`/calls/${id}/hangup`, undefined, { auth: a.serverKey })).status).toBe(200);
    await expectError(command(api, onA.widgetToken, { kind: 'hangup', request_id: 'not-my-ended-call', ref: id }), 409, 'invalid_state');
  });
});
