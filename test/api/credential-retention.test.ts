/**
 * Dead credentials leave the store (api/domain/retention.ts): a day after a widget token or a
 * launch ticket expired, the reaper deletes its row, with a clock the test moves. What a live
 * session needs stays: the first token that names it (logout still ends it whole) and its young
 * tokens; and nothing younger than a day after its expiry goes.
 */
import { describe, expect, it } from 'vitest';
import { LIMITS } from '../../shared/limits.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { launchTicket, openSession, widgetState } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { ORIGIN, seedTenant } from '../helpers/tenant.js';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;
const DAY_MS = 24 * HOUR_MS;

interface TokenRow {
  id: string;
  family_id: string | null;
  expires_at: number;
  revoked_at: number | null;
}

const tokens = (h: Harness) => h.services.db.query<TokenRow>('SELECT id, family_id, expires_at, revoked_at FROM widget_sessions ORDER BY created_at, id');
const ticketCount = async (h: Harness) => (await h.services.db.query<{ n: number }>('SELECT count(*)::int AS n FROM launch_tickets'))[0]!.n;

async function refresh(api: Client, token: string): Promise<string> {
  const answer = await api.post('/widget/refresh', undefined, { auth: token, origin: ORIGIN });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.widget_token as string;
}

describe.each(storeDrivers())('dead credentials (%s)', (driver) => {
  it('go a day after they expired, but a live session keeps its first token, and logout still ends it whole', async () => {
    const h = await createHarness(driver);
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const start = h.clock.now();

      // A page load's session that is never refreshed, with a launch ticket; and a long-lived
      // tab's session, refreshed every 25 minutes, whose first token minted a ticket too.
      const closedTab = await openSession(api, t);
      await launchTicket(api, closedTab);
      await h.clock.advance(MINUTE_MS); // rows are read in the order they were made
      const openTab = await openSession(api, t);
      await launchTicket(api, openTab);
      const [closedRow, firstRow] = await tokens(h);

      let current = openTab;
      const refreshUntil = async (time: number) => {
        while (h.clock.now() + 25 * MINUTE_MS <= time) {
          await h.clock.advance(25 * MINUTE_MS);
          current = await refresh(api, current);
        }
      };

      // Within a day of their expiry, nothing goes.
      await refreshUntil(start + 20 * HOUR_MS);
      await h.services.reaper.tick();
      expect((await tokens(h)).map((row) => row.id)).toContain(closedRow!.id);
      expect(await ticketCount(h)).toBe(2);

      // Past it, the closed tab's token and ticket go; so do the open tab's first ticket and its
      // tokens that expired over a day ago, but not the first token that names the session.
      await refreshUntil(start + 27 * HOUR_MS);
      await h.services.reaper.tick();
      const now = h.clock.now();
      const kept = await tokens(h);
      expect(kept.map((row) => row.id)).not.toContain(closedRow!.id);
      expect(kept[0]).toMatchObject({ id: firstRow!.id, family_id: null });
      const refreshed = kept.slice(1);
      expect(refreshed.every((row) => row.family_id === firstRow!.id && row.expires_at >= now - DAY_MS)).toBe(true);
      // a token every 25 minutes: those of the last day and the 30 minutes of its life remain
      expect(refreshed.length).toBeGreaterThanOrEqual(Math.floor(DAY_MS / (25 * MINUTE_MS)));
      expect(refreshed.length).toBeLessThanOrEqual(Math.ceil((DAY_MS + LIMITS.widgetTokenTtlSeconds * 1000) / (25 * MINUTE_MS)));
      expect(await ticketCount(h)).toBe(0);
      expect((await widgetState(api, current)).status).toBe(200);

      // Logout ends the session whole, its kept first token included; a day after its last token
      // expired, none of it is left.
      expect(kept.every((row) => row.revoked_at === null)).toBe(true);
      expect((await api.post('/widget/revoke', undefined, { auth: current, origin: ORIGIN })).status).toBe(200);
      await expectError(widgetState(api, current), 401, 'unauthorized');
      // the first token that names the session, and every token still alive, record the end
      const ended = (await tokens(h)).filter((row) => row.id === firstRow!.id || row.expires_at > h.clock.now());
      expect(ended.length).toBeGreaterThan(1);
      expect(ended.every((row) => row.revoked_at !== null)).toBe(true);

      await h.clock.advance(DAY_MS + LIMITS.widgetTokenTtlSeconds * 1000 + MINUTE_MS);
      await h.services.reaper.tick();
      expect(await tokens(h)).toEqual([]);
    } finally {
      await h.close();
    }
  });

  it('are looked for once an hour, and a backlog (as after an upgrade) a minute at a time', async () => {
    const h = await createHarness(driver);
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const longAgo = h.clock.now() - 30 * DAY_MS;
      await h.services.db.query(
        `INSERT INTO widget_sessions (id, integration_id, member_id, origin, lookup, secret_hash, created_at, expires_at)
         SELECT 'ws_old' || g, $1, $2, $3, 'old' || g, '\\x00', $4::bigint, $4::bigint + 1800000 FROM generate_series(1, 30000) g`,
        [t.integrationId, t.agent.id, ORIGIN, longAgo],
      );
      await h.services.reaper.tick();
      const left = (await tokens(h)).length;
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThan(30_000);
      await h.clock.advance(MINUTE_MS);
      await h.services.reaper.tick();
      expect(await tokens(h)).toEqual([]);

      await openSession(api, t);
      const ttl = LIMITS.widgetTokenTtlSeconds * 1000;
      await h.clock.advance(DAY_MS + ttl - 30 * MINUTE_MS);
      await h.services.reaper.tick(); // a pass: the token is 30 minutes short of a day past its expiry
      await h.clock.advance(31 * MINUTE_MS);
      await h.services.reaper.tick(); // a day past its expiry, but within the hour of the last pass
      expect(await tokens(h)).toHaveLength(1);
      await h.clock.advance(HOUR_MS);
      await h.services.reaper.tick();
      expect(await tokens(h)).toEqual([]);
    } finally {
      await h.close();
    }
  });
});
