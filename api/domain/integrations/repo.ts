/** Reading integrations, with the account fields every request needs. */
import { C2CError } from '../../../shared/errors.js';
import { parseOrigin } from '../../../shared/origin.js';
import type { Sql } from '../../store/index.js';
import type { IntegrationRow } from './model.js';

export interface IntegrationWithAccount extends IntegrationRow {
  account_status: 'active' | 'suspended';
  account_kind: 'personal' | 'business';
}

/** Columns of IntegrationWithAccount, for queries joining integrations i and accounts a. */
export const INTEGRATION_COLUMNS = 'i.*, a.status AS account_status, a.kind AS account_kind';

export const INTEGRATION_SELECT = `SELECT ${INTEGRATION_COLUMNS} FROM integrations i JOIN accounts a ON a.id = i.account_id`;

export async function findIntegration(sql: Sql, id: string): Promise<IntegrationWithAccount | undefined> {
  const [row] = await sql.query<IntegrationWithAccount>(`${INTEGRATION_SELECT} WHERE i.id = $1`, [id]);
  return row;
}

/** integration_disabled unless both the integration and its account are active. */
export function assertIntegrationUsable(integration: IntegrationWithAccount): void {
  if (integration.status !== 'active') {
    throw new C2CError('integration_disabled', `The integration is ${integration.status}.`);
  }
  if (integration.account_status !== 'active') {
    throw new C2CError('integration_disabled', 'The account that owns this integration is suspended.');
  }
}

/** Whether an origin may use this integration's widget (exact match, or allow-all). */
export function originAllowed(integration: IntegrationRow, origin: string): boolean {
  const normalized = parseOrigin(origin);
  if (!normalized) return false;
  return integration.allow_all_origins || integration.allowed_origins.includes(normalized);
}
