/**
 * A database that refuses the migrations for a reason of its own (api/serve.ts MIGRATION_REFUSALS):
 * the start fails as a ConfigError, the one line `c2c serve` prints, naming DATABASE_URL and what
 * to change, instead of a stack trace repeated at every restart.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../api/config.js';
import { openServices } from '../../api/serve.js';
import { postgresUrl, storeDrivers } from '../helpers/env.js';
import { createPgDatabase } from '../helpers/databases.js';

describe.skipIf(!storeDrivers().includes('pg'))('a database that refuses the migrations', () => {
  it('fails the start in one line naming DATABASE_URL when its role may not create tables', async () => {
    const database = await createPgDatabase();
    const role = `c2c_reader_${Date.now().toString(36)}`;
    const admin = new pg.Client({ connectionString: database.url });
    await admin.connect();
    try {
      // PostgreSQL 15 gives ordinary roles no CREATE on `public`; said here so any version behaves so
      await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'secret-pw'`);
      await admin.query(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`);
      const url = new URL(database.url);
      url.username = role;
      url.password = 'secret-pw';
      const refused = await openServices(loadConfig({ DATABASE_URL: url.toString(), LOG_LEVEL: 'silent' })).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(ConfigError);
      const message = (refused as Error).message;
      expect(message).toMatch(/^PostgreSQL at DATABASE_URL \(.*\) refused the migrations: its role may not create or change the tables/);
      expect(message).toContain('permission denied');
      expect(message).not.toContain('secret-pw');
    } finally {
      await admin.end();
      await database.drop();
      const cleanup = new pg.Client({ connectionString: postgresUrl() });
      await cleanup.connect().then(() => cleanup.query(`DROP ROLE IF EXISTS ${role}`)).finally(() => cleanup.end());
    }
  }, 30_000);

  it('fails the start in one line naming DATABASE_URL when the database takes no writes (a read-only standby)', async () => {
    const database = await createPgDatabase();
    const name = new URL(database.url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: postgresUrl() });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE ${name} SET default_transaction_read_only = on`);
      const refused = await openServices(loadConfig({ DATABASE_URL: database.url, LOG_LEVEL: 'silent' })).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(ConfigError);
      expect((refused as Error).message).toMatch(/^PostgreSQL at DATABASE_URL \(.*\) refused the migrations: it takes no writes/);
    } finally {
      await admin.end();
      await database.drop();
    }
  }, 30_000);
});
