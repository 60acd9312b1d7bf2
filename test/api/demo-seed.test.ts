/**
 * The demo tenant `npm start` seeds (api/demo/seed.ts): a first start cut short (killed, out of
 * memory, a store error) after some of it was made is completed by the next start, with the
 * integration covering only its Sales department, never left half-made.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../api/config.js';
import { createAccount, createDepartment } from '../../api/domain/operator/accounts.js';
import { DEMO, seedDemo } from '../../api/demo/seed.js';
import { unblockNumber } from '../../api/domain/operator/telephony.js';
import { storeDrivers } from '../helpers/env.js';
import { client, createHarness, type Harness } from '../helpers/harness.js';

const [driver] = storeDrivers();

describe(`the demo seed (store ${driver})`, () => {
  let h: Harness;
  let dataDir: string;
  beforeEach(async () => {
    h = await createHarness(driver!);
    dataDir = mkdtempSync(join(tmpdir(), 'c2c-seed-'));
  });
  afterEach(async () => {
    await h.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const config = () => loadConfig({ C2C_DATA_DIR: dataDir, DEMO_PORT: '3999', LOG_LEVEL: 'silent' });
  const session = (key: string, email: string) =>
    client(h.app).post('/sessions', { integration_id: DEMO.integrationId, agent: { type: 'email', value: email }, origin: 'http://127.0.0.1:3999' }, { auth: key });

  it('completes what a first start cut short left undone, and the integration covers only Sales', async () => {
    // the first start got as far as the account and one department
    await createAccount(h.services, { id: DEMO.accountId, kind: 'business', name: 'Demo Co', balanceMicros: DEMO.balanceMicros });
    await createDepartment(h.services, DEMO.accountId, 'Sales', DEMO.sales);
    const { credentials, fresh } = await seedDemo(h.services, config());
    expect(fresh).toBe(true);
    expect((await session(credentials.server_key, DEMO.agent.email)).status).toBe(201);
    // outside the coverage, and disabled: refused as the demo shows
    expect((await session(credentials.server_key, DEMO.outside.email)).body).toMatchObject({ ok: false, error: 'agent_not_assigned' });
    expect((await session(credentials.server_key, DEMO.disabled.email)).body).toMatchObject({ ok: false, error: 'agent_disabled' });
    const [rates] = await h.services.db.query<{ n: number }>("SELECT count(*)::int AS n FROM rates WHERE prefix IN ('+1', '+44')");
    expect(rates!.n).toBe(2);
    expect(await h.services.db.query('SELECT 1 FROM blocked_numbers WHERE account_id = $1', [DEMO.accountId])).toHaveLength(1);
    // and a start after that finds everything there, reusing the key
    const again = await seedDemo(h.services, config());
    expect(again).toMatchObject({ fresh: false, credentials: { server_key: credentials.server_key } });
  });

  it('blocks its number once: an operator who unblocked it (the README\'s example) keeps it unblocked', async () => {
    await seedDemo(h.services, config());
    const blocked = async () => (await h.services.db.query('SELECT 1 FROM blocked_numbers WHERE account_id = $1 AND number = $2', [DEMO.accountId, DEMO.blockedNumber])).length;
    expect(await blocked()).toBe(1);
    expect(await unblockNumber(h.services, DEMO.accountId, DEMO.blockedNumber)).toBe(true);
    await seedDemo(h.services, config());
    expect(await blocked()).toBe(0);
  });

  it("leaves an operator's own rate for a demo prefix as it is", async () => {
    await h.services.db.query("INSERT INTO rates (prefix, per_minute_micros) VALUES ('+1', 12345)");
    await seedDemo(h.services, config());
    const [rate] = await h.services.db.query<{ per_minute_micros: string | number }>("SELECT per_minute_micros FROM rates WHERE prefix = '+1'");
    expect(Number(rate!.per_minute_micros)).toBe(12345);
  });
});
