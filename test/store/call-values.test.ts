/**
 * The store refuses a call status or end reason no rule knows (migration 023): such a call would be
 * neither live nor ended, held by no rule of the reaper, its agent free and its wallet share released.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeDrivers } from '../helpers/env.js';
import { readyAgent, requestCall } from '../helpers/flows.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';
import { seedTenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('call values on %s', (driver) => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness(driver);
  });
  afterAll(() => h.close());

  it('refuses a status, an end reason or a hangup reason outside the known sets, and takes the known ones', async () => {
    const t = await seedTenant(h.services);
    const api = client(h.app);
    await readyAgent(api, t);
    const id = (await requestCall(api, t)).body.request_id as string;
    const set = (column: string, value: string) => h.services.db.query(`UPDATE call_intents SET ${column} = $2 WHERE id = $1`, [id, value]);
    await expect(set('status', 'answered')).rejects.toThrow(/call_intents_status_known/);
    await expect(set('end_reason', 'dropped')).rejects.toThrow(/call_intents_end_reason_known/);
    await expect(set('hangup_reason', 'dropped')).rejects.toThrow(/call_intents_hangup_reason_known/);
    await set('hangup_reason', 'declined');
    await set('status', 'canceled');
    await set('end_reason', 'hangup');
    const [row] = await h.services.db.query<{ status: string; end_reason: string }>('SELECT status, end_reason FROM call_intents WHERE id = $1', [id]);
    expect(row).toEqual({ status: 'canceled', end_reason: 'hangup' });
  });
});
