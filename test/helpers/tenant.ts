/** A seeded tenant for API suites: one business account with agents in and out of coverage. */
import type { Services } from '../../api/services.js';
import { createAccount, createDepartment, createMember } from '../../api/domain/operator/accounts.js';
import { createIntegration, setCoverage } from '../../api/domain/operator/integrations.js';
import { blockNumber, setRate } from '../../api/domain/operator/telephony.js';

export const ORIGIN = 'https://crm.example.com';
export const CALLER_ID = '+12025550100';
export const US_NUMBER = '+12025550123';
export const UK_NUMBER = '+442079460123';
export const FR_NUMBER = '+33142685300';
export const BLOCKED_NUMBER = '+12025550666';

export interface Tenant {
  accountId: string;
  integrationId: string;
  serverKey: string;
  salesId: string;
  supportId: string;
  agent: { id: string; email: string; uuid: string };
  disabled: { id: string; email: string };
  outside: { id: string; email: string };
}

export async function seedTenant(services: Services, options: { balanceMicros?: number; concurrencyLimit?: number } = {}): Promise<Tenant> {
  const deps = { db: services.db, bus: services.bus, clock: services.clock };
  const account = await createAccount(deps, { kind: 'business', name: 'Acme', balanceMicros: options.balanceMicros ?? 100_000_000 });
  const sales = await createDepartment(deps, account.id, 'Sales');
  const support = await createDepartment(deps, account.id, 'Support');
  const agent = await createMember(deps, { accountId: account.id, email: 'ana@acme.example', name: 'Ana Agent', departmentId: sales.id });
  const disabled = await createMember(deps, { accountId: account.id, email: 'dan@acme.example', name: 'Dan', departmentId: sales.id, enabled: false });
  const outside = await createMember(deps, { accountId: account.id, email: 'olga@acme.example', name: 'Olga', departmentId: support.id });
  const { integration, serverKey } = await createIntegration(deps, {
    accountId: account.id,
    name: 'Acme CRM',
    origins: [ORIGIN],
    outbound: true,
    inbound: true,
    numberVisibility: 'show',
    controls: ['mute', 'dtmf'],
    callerId: CALLER_ID,
    destinationCountries: ['US', 'GB'],
    maxCallSeconds: 3600,
    concurrencyLimit: options.concurrencyLimit ?? 10,
  });
  await setCoverage(deps, integration.id, { mode: 'departments', inheritFuture: true, departmentIds: [sales.id] });
  await setRate(deps, '+1', 10_000);
  await setRate(deps, '+44', 20_000);
  await blockNumber(deps, account.id, BLOCKED_NUMBER);
  return {
    accountId: account.id,
    integrationId: integration.id,
    serverKey,
    salesId: sales.id,
    supportId: support.id,
    agent: { id: agent.id, email: agent.email, uuid: agent.uuid },
    disabled: { id: disabled.id, email: disabled.email },
    outside: { id: outside.id, email: outside.email },
  };
}
