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
  databasePoolSize?: number;
  /** PGlite directory; undefined keeps the database in memory */
  dataDir?: string | undefined;
}

/** Connects the driver config chooses (PostgreSQL reached, or PGlite's directory opened), without migrating. */
export function connectStore(config: StoreConfig): Promise<Db> {
  return config.databaseUrl
    ? openPg(config.databaseUrl, { statementTimeoutMs: config.databaseStatementTimeoutMs, connectTimeoutMs: config.databaseConnectTimeoutMs, max: config.databasePoolSize })
    : openPglite(config.dataDir ? join(config.dataDir, 'pglite') : undefined);
}

export async function openStore(config: StoreConfig): Promise<Db> {
  const db = await connectStore(config);
  await migrate(db);
  return db;
}
