/** Applies the SQL files in ./migrations in name order, each once, recorded in schema_migrations. */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
// Any constant works: it only has to be the same for every node migrating the same database.
const MIGRATION_LOCK = 726_317_001;

/** A migration may run, or wait for another node's, longer than the driver's timeouts allow a request. */
const MIGRATING = { untimed: true } as const;

export async function migrate(db: Db): Promise<string[]> {
  const files = readdirSync(MIGRATIONS_DIR)
    .filter((name) => name.endsWith('.sql'))
    .sort();
  return db.tx(async (sql) => {
    // Two nodes starting together must not both apply a migration.
    await sql.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await sql.query('CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const done = new Set((await sql.query<{ name: string }>('SELECT name FROM schema_migrations')).map((r) => r.name));
    const applied: string[] = [];
    for (const name of files) {
      if (done.has(name)) continue;
      const script = readFileSync(MIGRATIONS_DIR + name, 'utf8');
      for (const statement of splitStatements(script)) await sql.query(statement);
      await sql.query('INSERT INTO schema_migrations (name) VALUES ($1)', [name]);
      applied.push(name);
    }
    return applied;
  }, MIGRATING);
}

/** Splits a migration on semicolons at line ends; our migrations hold no procedural bodies. */
function splitStatements(script: string): string[] {
  return script
    .replace(/^\s*--.*$/gm, '')
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
