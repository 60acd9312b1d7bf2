/** A fresh, empty database per suite on either driver, dropped afterwards. */
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import type { Db } from '../../api/store/index.js';
import { openPg, type PgOptions } from '../../api/store/pg.js';
import { openPglite } from '../../api/store/pglite.js';
import { migrate } from '../../api/store/migrate.js';
import { postgresUrl, type StoreDriver } from './env.js';

export interface TestDatabase {
  db: Db;
  /** the URL of the database (pg only), for processes that open it themselves */
  url?: string;
  drop(): Promise<void>;
}

/** A new empty PostgreSQL database on the server of `baseUrl` (default DATABASE_URL). */
export async function createPgDatabase(baseUrl?: string): Promise<{ url: string; drop(): Promise<void> }> {
  const base = baseUrl ?? postgresUrl();
  if (!base) throw new Error('DATABASE_URL is not set');
  const name = `c2c_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

export async function openTestDatabase(driver: StoreDriver, options: { migrate?: boolean; pg?: PgOptions } = {}): Promise<TestDatabase> {
  if (driver === 'pglite') {
    const db = await openPglite();
    if (options.migrate !== false) await migrate(db);
    return { db, drop: () => db.close() };
  }
  const created = await createPgDatabase();
  const db = await openPg(created.url, options.pg);
  if (options.migrate !== false) await migrate(db);
  return {
    db,
    url: created.url,
    async drop() {
      await db.close();
      await created.drop();
    },
  };
}
