/**
 * Retention of widget command records (COMMAND_RETENTION_DAYS, api/domain/retention.ts), with a
 * clock the test moves: by default every record stays and a request_id never runs twice; with a
 * window, the reaper deletes records older than it, except a command still waiting for a live
 * call window, and a request_id that old runs again.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { pruneCommands } from '../../api/domain/retention.js';
import { storeDrivers } from '../helpers/env.js';
import { expectError } from '../helpers/expect.js';
import { command, heartbeat, openSession, readyAgent } from '../helpers/flows.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { seedTenant } from '../helpers/tenant.js';

const DAY_MS = 24 * 3600 * 1000;

async function recorded(h: Harness): Promise<string[]> {
  const rows = await h.services.db.query<{ request_id: string }>('SELECT request_id FROM widget_commands ORDER BY request_id');
  return rows.map((row) => row.request_id);
}

describe.each(storeDrivers())('widget command records (%s)', (driver) => {
  it('are all kept by default, and a request_id never runs twice', async () => {
    const h = await createHarness(driver);
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const agent = await readyAgent(api, t);
      const first = await command(api, agent.widgetToken, { kind: 'availability', request_id: 'a-old', available: false });
      await h.clock.advance(400 * DAY_MS);
      await h.services.reaper.tick();
      expect(await recorded(h)).toEqual(['a-old']);
      const widgetToken = await openSession(api, t);
      const replay = await command(api, widgetToken, { kind: 'availability', request_id: 'a-old', available: false });
      expect(replay.body).toEqual(first.body);
      // asked to do something else under that id, it still does not run
      await expectError(command(api, widgetToken, { kind: 'availability', request_id: 'a-old', available: true }), 409, 'idempotency_conflict');
      expect(await recorded(h)).toEqual(['a-old']);
    } finally {
      await h.close();
    }
  });

  it('older than COMMAND_RETENTION_DAYS are deleted, but not a command still waiting for a live window', async () => {
    const h = await createHarness(driver, { commandRetentionDays: 30 });
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const agent = await readyAgent(api, t);
      const old = await command(api, agent.widgetToken, { kind: 'availability', request_id: 'a-old', available: false });
      expect((await command(api, agent.widgetToken, { kind: 'focus', request_id: 'f-waiting' })).body).toMatchObject({ ok: true, status: 'queued' });

      // a month on, the window is still there (it kept heartbeating), and a new command arrives
      for (let half = 0; half < 62; half += 1) {
        await h.clock.advance(DAY_MS / 2);
        expect((await heartbeat(api, agent.engineToken)).status).toBe(200);
      }
      const widgetToken = await openSession(api, t);
      expect((await command(api, widgetToken, { kind: 'availability', request_id: 'a-new', available: true })).body).toMatchObject({ ok: true });
      await h.services.reaper.tick();
      expect(await recorded(h)).toEqual(['a-new', 'f-waiting']);

      // a request_id older than the window is new again
      const again = await command(api, widgetToken, { kind: 'availability', request_id: 'a-old', available: false });
      expect(again.body).toMatchObject({ ok: true, status: 'done' });
      expect(again.body.command_id).not.toBe(old.body.command_id);

      // once its window has closed, the waiting command goes too, at the next pass (a minute on)
      expect((await api.post('/engine/close', {}, { auth: agent.engineToken })).status).toBe(200);
      await h.services.reaper.tick();
      expect(await recorded(h)).toEqual(['a-new', 'a-old', 'f-waiting']);
      await h.clock.advance(60_000);
      await h.services.reaper.tick();
      expect(await recorded(h)).toEqual(['a-new', 'a-old']);
    } finally {
      await h.close();
    }
  });
});

describe.each(storeDrivers())('the retention pass (%s)', (driver) => {
  it('reaches old records behind a whole batch of records it must keep', async () => {
    const h = await createHarness(driver);
    try {
      const api = client(h.app);
      const t = await seedTenant(h.services);
      const agent = await readyAgent(api, t);
      const old = h.clock.now();
      // More than one statement's batch (10,000) of old commands still waiting for the live window, then one done.
      await h.services.db.query(
        `INSERT INTO widget_commands (integration_id, member_id, request_id, kind, engine_id, status, created_at)
         SELECT $1, $2, 'pending-' || g, 'focus', $3, 'queued', $4 FROM generate_series(1, 10050) AS g`,
        [t.integrationId, t.agent.id, agent.engineId, old],
      );
      await h.services.db.query(
        `INSERT INTO widget_commands (integration_id, member_id, request_id, kind, status, created_at) VALUES ($1, $2, 'old-done', 'focus', 'done', $3)`,
        [t.integrationId, t.agent.id, old],
      );
      expect(await pruneCommands(h.services.db, old + 31 * DAY_MS, 30 * DAY_MS)).toBe(1);
      const [left] = await h.services.db.query<{ n: number; done: number }>(
        `SELECT count(*)::int AS n, count(*) FILTER (WHERE request_id = 'old-done')::int AS done FROM widget_commands`,
      );
      expect(left).toEqual({ n: 10050, done: 0 });
    } finally {
      await h.close();
    }
  }, 60_000);
});

describe('COMMAND_RETENTION_DAYS', () => {
  it('is a whole number of days, at least one, or unset', () => {
    expect(loadConfig({}).commandRetentionDays).toBeUndefined();
    expect(loadConfig({ COMMAND_RETENTION_DAYS: '90' }).commandRetentionDays).toBe(90);
    for (const bad of ['0', '1.5', 'month']) expect(() => loadConfig({ COMMAND_RETENTION_DAYS: bad })).toThrow(/COMMAND_RETENTION_DAYS/);
  });
});
