/**
 * The demo tenant that `npm start` seeds (each piece with a fixed id, created where it is missing,
 * so a first start cut short is completed by the next, not left half-made): a funded business
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
import { createIntegration, rotateServerKey, setOrigins } from '../domain/operator/integrations.js';
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

async function exists(deps: OperatorDeps, table: string, id: string, column = 'id'): Promise<boolean> {
  return (await deps.db.query(`SELECT 1 FROM ${table} WHERE ${column} = $1`, [id])).length > 0;
}

/** Seeds what is missing and returns the credentials, plus whether a new server key was issued. */
export async function seedDemo(deps: OperatorDeps, config: Config): Promise<{ credentials: DemoCredentials; fresh: boolean }> {
  const origin = `http://127.0.0.1:${config.demoPort}`;
  const firstStart = !(await exists(deps, 'accounts', DEMO.accountId));
  if (firstStart) await createAccount(deps, { id: DEMO.accountId, kind: 'business', name: 'Demo Co', balanceMicros: DEMO.balanceMicros });
  for (const [name, id] of [['Sales', DEMO.sales], ['Support', DEMO.support]] as const) {
    if (!(await exists(deps, 'departments', id))) await createDepartment(deps, DEMO.accountId, name, id);
  }
  const members = [
    { ...DEMO.agent, accountId: DEMO.accountId, departmentId: DEMO.sales },
    { ...DEMO.disabled, accountId: DEMO.accountId, departmentId: DEMO.sales, enabled: false },
    { ...DEMO.outside, accountId: DEMO.accountId, departmentId: DEMO.support },
  ];
  for (const member of members) if (!(await exists(deps, 'members', member.id))) await createMember(deps, member);
  // rates are the platform's, not the demo account's: an operator's own are left as they are
  for (const [prefix, micros] of [['+1', 10_000], ['+44', 20_000]] as const) {
    if (!(await exists(deps, 'rates', prefix, 'prefix'))) await setRate(deps, prefix, micros);
  }
  // with the account, or with the integration (a first start cut short before it): an operator who
  // unblocked the number later (the README's example) keeps it unblocked
  const blockNow = firstStart || !(await exists(deps, 'integrations', DEMO.integrationId));
  if (blockNow) await blockNumber(deps, DEMO.accountId, DEMO.blockedNumber);
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
      coverage: { mode: 'departments', inheritFuture: true, departmentIds: [DEMO.sales] },
    });
    serverKey = created.serverKey;
    fresh = true;
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
