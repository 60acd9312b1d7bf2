/**
 * The demo tenant that `npm start` seeds (idempotently, with fixed ids): a funded business
 * account, an assigned agent, a disabled member, a member outside the integration's coverage, and
 * an integration whose only allowed origin is the demo CRM's. Its credentials go to
 * <C2C_DATA_DIR>/demo.json, so anyone can drive the API with curl.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { writePrivateFile } from '../private-file.js';
import { join } from 'node:path';
import type { Config } from '../config.js';
import { parseCredential } from '../domain/credentials.js';
import { authenticateServerKey } from '../domain/server-keys.js';
import { createAccount, createDepartment, createMember, type OperatorDeps } from '../domain/operator/accounts.js';
import { createIntegration, rotateServerKey, setCoverage, setOrigins } from '../domain/operator/integrations.js';
import { blockNumber, setRate } from '../domain/operator/telephony.js';

export const DEMO = {
  accountId: 'acc_demo',
  integrationId: 'c2c_demo',
  sales: 'dep_demo_sales',
  support: 'dep_demo_support',
  agent: { id: 'mem_demo_agent', email: 'agent@demo.example', name: 'Alex Agent' },
  disabled: { id: 'mem_demo_disabled', email: 'disabled@demo.example', name: 'Dana Disabled' },
  outside: { id: 'mem_demo_outside', email: 'outside@demo.example', name: 'Olly Outside' },
  callerId: '+12025550100',
  blockedNumber: '+12025550666',
  balanceMicros: 50_000_000,
} as const;

export interface DemoCredentials {
  base_url: string;
  site_url: string;
  integration_id: string;
  server_key: string;
  allowed_origin: string;
  agent: { type: 'email'; value: string };
  agent_disabled: { type: 'email'; value: string };
  agent_unassigned: { type: 'email'; value: string };
}

export function demoFile(config: Config): string {
  return join(config.dataDir, 'demo.json');
}

async function exists(deps: OperatorDeps, table: string, id: string): Promise<boolean> {
  return (await deps.db.query(`SELECT 1 FROM ${table} WHERE id = $1`, [id])).length > 0;
}

/** Seeds what is missing and returns the credentials, plus whether a new server key was issued. */
export async function seedDemo(deps: OperatorDeps, config: Config): Promise<{ credentials: DemoCredentials; fresh: boolean }> {
  const origin = `http://127.0.0.1:${config.demoPort}`;
  if (!(await exists(deps, 'accounts', DEMO.accountId))) {
    await createAccount(deps, { id: DEMO.accountId, kind: 'business', name: 'Demo Co', balanceMicros: DEMO.balanceMicros });
    await createDepartment(deps, DEMO.accountId, 'Sales', DEMO.sales);
    await createDepartment(deps, DEMO.accountId, 'Support', DEMO.support);
    await createMember(deps, { ...DEMO.agent, accountId: DEMO.accountId, departmentId: DEMO.sales });
    await createMember(deps, { ...DEMO.disabled, accountId: DEMO.accountId, departmentId: DEMO.sales, enabled: false });
    await createMember(deps, { ...DEMO.outside, accountId: DEMO.accountId, departmentId: DEMO.support });
    await setRate(deps, '+1', 10_000);
    await setRate(deps, '+44', 20_000);
    await blockNumber(deps, DEMO.accountId, DEMO.blockedNumber);
  }
  let serverKey: string | undefined;
  let fresh = false;
  if (!(await exists(deps, 'integrations', DEMO.integrationId))) {
    const created = await createIntegration(deps, {
      id: DEMO.integrationId,
      accountId: DEMO.accountId,
      name: 'Demo CRM',
      origins: [origin],
      outbound: true,
      inbound: true,
      numberVisibility: 'masked',
      controls: ['mute', 'dtmf'],
      callerId: DEMO.callerId,
      destinationCountries: ['US', 'CA', 'GB'],
      maxCallSeconds: 3600,
      concurrencyLimit: 10,
    });
    serverKey = created.serverKey;
    fresh = true;
    await setCoverage(deps, DEMO.integrationId, { mode: 'departments', inheritFuture: true, departmentIds: [DEMO.sales] });
  } else {
    // DEMO_PORT may differ from the last start: the allowed origin follows it.
    await setOrigins(deps, DEMO.integrationId, [origin]);
    serverKey = await reusableKey(deps, config);
    if (!serverKey) {
      serverKey = await rotateServerKey(deps, DEMO.integrationId);
      fresh = true;
    }
  }
  const credentials: DemoCredentials = {
    base_url: config.apiBaseUrl,
    site_url: config.siteUrl,
    integration_id: DEMO.integrationId,
    server_key: serverKey,
    allowed_origin: origin,
    agent: { type: 'email', value: DEMO.agent.email },
    agent_disabled: { type: 'email', value: DEMO.disabled.email },
    agent_unassigned: { type: 'email', value: DEMO.outside.email },
  };
  mkdirSync(config.dataDir, { recursive: true });
  writePrivateFile(demoFile(config), `${JSON.stringify(credentials, null, 2)}\n`);
  return { credentials, fresh };
}

/** The key in an existing demo.json, when it still authenticates. */
async function reusableKey(deps: OperatorDeps, config: Config): Promise<string | undefined> {
  const file = demoFile(config);
  if (!existsSync(file)) return undefined;
  try {
    const { server_key } = JSON.parse(readFileSync(file, 'utf8')) as Partial<DemoCredentials>;
    if (!parseCredential('serverKey', server_key)) return undefined;
    await authenticateServerKey(deps.db, server_key);
    return server_key;
  } catch {
    return undefined;
  }
}
