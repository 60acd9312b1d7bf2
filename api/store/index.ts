/** Store factory: PostgreSQL when DATABASE_URL is set, PGlite under C2C_DATA_DIR otherwise. */
import { join } from 'node:path';
import type { Db } from './db.js';
import { migrate } from './migrate.js';
import { openPg } from './pg.js';
import { openPglite } from './pglite.js';

export type { Db, Sql, Row } from './db.js';
export { one, isUniqueViolation } from './db.js';

export interface StoreConfig {
  databaseUrl?: string | undefined;
  databaseStatementTimeoutMs?: number;
  databaseConnectTimeoutMs?: number;
  /** PGlite directory; undefined keeps the database in memory */
  dataDir?: string | undefined;
}

export async function openStore(config: StoreConfig): Promise<Db> {
  const db = config.databaseUrl
    ? await openPg(config.databaseUrl, { statementTimeoutMs: config.databaseStatementTimeoutMs, connectTimeoutMs: config.databaseConnectTimeoutMs })
    : await openPglite(config.dataDir ? join(config.dataDir, 'pglite') : undefined);
  await migrate(db);
  return db;
}
