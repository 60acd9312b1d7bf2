/**
 * A widget session (spec sections 4 and 5): every token refreshed from its first one is the same
 * session, which POST /widget/revoke (the SDK's endSession, for logout) ends whole, however the
 * refreshes and the revoke interleave and whichever node serves them.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../api/clock.js';
import { setIntegrationEnabled, setMemberOverrides } from '../../api/domain/operator/integrations.js';
import { LIMITS } from '../../shared/limits.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { openTestDatabase } from '../helpers/databases.js';
import { launchTicket, openSession, widgetState } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('widget sessions on %s', (driver) => {
  /** Two nodes on one store, each with its own bus: what one announces reaches the other only when the test delivers it. */
  async function twoNodes(run: (x: Harness, y: Harness) => Promise<void>, options: { ownClocks?: boolean } = {}): Promise<void> {
    const database = await openTestDatabase(driver);
    const x = await createHarness(driver, {}, { database });
    const y = await createHarness(driver, {}, { database, clock: options.ownClocks ? new ManualClock(x.clock.now()) : x.clock });
    try {
      await run(x, y);
    } finally {
      await y.close();
      await x.close();
      await database.drop();
    }
  }
  const refreshOn = (api: Client, token: string) => api.post('/widget/refresh', undefined, { auth: token, origin: ORIGIN });

  it('revokes the whole widget session: every token refreshed from it, one minted during a grace included', () =>
    twoNodes(async (h) => {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const first = await openSession(api, t);
      const refresh = async (token: string) => {
        const answer = await api.post('/widget/refresh', undefined, { auth: token, origin: 'https://crm.example.com' });
        expect(answer.status, JSON.stringify(answer.body)).toBe(200);
        return answer.body.widget_token as string;
      };
      const second = await refresh(first);
      const forked = await refresh(first); // the first answer lost: asked again within the grace
      const third = await refresh(second);
      const other = await openSession(api, t); // another tab's session of the same agent
      for (const token of [first, second, forked, third, other]) expect((await widgetState(api, token)).status).toBe(200);

      // Logout from the page holding the newest token.
      expect((await api.post('/widget/revoke', undefined, { auth: third, origin: 'https://crm.example.com' })).status).toBe(200);
      for (const token of [first, second, forked, third]) {
        await expectError(widgetState(api, token), 401, 'unauthorized');
        await expectError(api.post('/widget/refresh', undefined, { auth: token, origin: 'https://crm.example.com' }), 401, 'unauthorized');
      }
      expect((await widgetState(api, other)).status).toBe(200); // a session of its own
    }));

  it('refuses a refresh on a node that has not heard of the revoke yet, so logout leaves no token behind', () =>
    twoNodes(async (x, y) => {
      const t = await seedTenant(y.services);
      const onX = client(x.app);
      const onY = client(y.app);
      const token = await openSession(onY, t);
      expect((await widgetState(onX, token)).status).toBe(200); // node X now holds the token's check in its cache
      const refreshed = await refreshOn(onY, token);
      expect(refreshed.status).toBe(200);
      expect((await onY.post('/widget/revoke', undefined, { auth: refreshed.body.widget_token, origin: ORIGIN })).status).toBe(200);
      // Node X has not heard of the refresh or the revoke: its cached check passes the old token
      // (within its grace), the store does not let it mint another.
      await expectError(refreshOn(onX, token), 401, 'unauthorized');
      await expectError(widgetState(onY, refreshed.body.widget_token), 401, 'unauthorized');
    }));

  it('refuses to pair a launch ticket of a revoked session, one minted by a token refreshed away and expired before the revoke included', () =>
    twoNodes(async (h) => {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const first = await openSession(api, t);
      const second = (await refreshOn(api, first)).body.widget_token as string;
      const ticket = await launchTicket(api, second);
      const third = (await refreshOn(api, second)).body.widget_token as string;
      await h.clock.advance((LIMITS.widgetTokenRefreshGraceSeconds + 1) * 1000); // the second token is past its grace
      expect((await api.post('/widget/revoke', undefined, { auth: third, origin: ORIGIN })).status).toBe(200);
      await expectError(api.post('/engine/pair', { ticket, simulated: true }), 401, 'ticket_invalid');
    }));

  it("takes a logout while the policy refuses the agent (disabled, the integration off): the session stays ended once things are switched back on", async () => {
    const h = await createHarness(driver);
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const deps = { db: h.services.db, bus: h.services.bus, clock: h.services.clock };
      const bySide = [
        { off: () => setMemberOverrides(deps, t.integrationId, t.agent.id, { calls_enabled: false }), on: () => setMemberOverrides(deps, t.integrationId, t.agent.id, { calls_enabled: true }), code: 'agent_disabled' as const },
        { off: () => setIntegrationEnabled(deps, t.integrationId, false), on: () => setIntegrationEnabled(deps, t.integrationId, true), code: 'integration_disabled' as const },
      ];
      for (const { off, on, code } of bySide) {
        const token = await openSession(api, t);
        await off();
        await expectError(widgetState(api, token), 403, code);
        // still only from the token's own origin, with its own secret
        await expectError(api.post('/widget/revoke', undefined, { auth: token, origin: 'https://elsewhere.example' }), 403, 'origin_not_allowed');
        await expectError(api.post('/widget/revoke', undefined, { auth: `${token.slice(0, -4)}AAAA`, origin: ORIGIN }), 401, 'unauthorized');
        const revoked = await api.post('/widget/revoke', undefined, { auth: token, origin: ORIGIN });
        expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
        await on();
        await expectError(widgetState(api, token), 401, 'unauthorized');
        await expectError(refreshOn(api, token), 401, 'unauthorized');
      }
    } finally {
      await h.close();
    }
  });

  it('refuses every token of a revoked session on a node whose clock lags the one that revoked it', () =>
    twoNodes(
      async (x, y) => {
        const t = await seedTenant(x.services);
        const onX = client(x.app);
        const onY = client(y.app);
        const first = await openSession(onX, t);
        const second = (await refreshOn(onX, first)).body.widget_token as string;
        const third = (await refreshOn(onX, second)).body.widget_token as string;
        // X judges the second token past its grace, Y (two seconds behind) not yet.
        await x.clock.advance((LIMITS.widgetTokenRefreshGraceSeconds + 1) * 1000);
        await y.clock.advance((LIMITS.widgetTokenRefreshGraceSeconds - 1) * 1000);
        expect((await widgetState(onY, second)).status).toBe(200); // Y holds the second token's check in its cache
        x.services.bus.subscribe((message) => y.services.bus.publish(message)); // Y hears what X announces
        expect((await onX.post('/widget/revoke', undefined, { auth: third, origin: ORIGIN })).status).toBe(200);
        await expectError(widgetState(onY, second), 401, 'unauthorized');
        await expectError(onY.post('/widget/launch-ticket', undefined, { auth: second, origin: ORIGIN }), 401, 'unauthorized');
      },
      { ownClocks: true },
    ));
});
