/**
 * Applies the SQL files in ./migrations in name order, each once, recorded in schema_migrations.
 * Each file is a transaction of its own, so a live database is locked one file at a time, and a
 * statement waits at most MIGRATION_LOCK_WAIT.timeoutMs for a table's lock: an ALTER queued behind
 * a long transaction would otherwise hold up every later statement on that table (heartbeats,
 * polls) for as long as it waits. It gives up, waits and tries again, then fails the start saying why.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { Db } from './db.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
// Any constant works: it only has to be the same for every node migrating the same database.
const MIGRATION_LOCK = 726_317_001;

/** A migration may run, or wait for another node's, longer than the driver's timeouts allow a request. */
const MIGRATING = { untimed: true } as const;

/** How long a migration's statement waits for a table's lock, how often a file is tried, and the pause between tries. */
export const MIGRATION_LOCK_WAIT = { timeoutMs: 5_000, attempts: 6, pauseMs: 2_000 };

/** SQLSTATE lock_not_available: the lock_timeout passed. */
const LOCK_NOT_AVAILABLE = '55P03';

export async function migrate(db: Db, wait = MIGRATION_LOCK_WAIT): Promise<string[]> {
  const files = readdirSync(MIGRATIONS_DIR)
    .filter((name) => name.endsWith('.sql'))
    .sort();
  await db.tx(async (sql) => {
    // Two nodes starting together must not both apply a migration.
    await sql.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await sql.query('CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
  }, MIGRATING);
  const done = new Set((await db.query<{ name: string }>('SELECT name FROM schema_migrations')).map((r) => r.name));
  const applied: string[] = [];
  for (const name of files) {
    if (!done.has(name) && (await applyOnce(db, name, wait))) applied.push(name);
  }
  return applied;
}

/** Applies one file unless another node has meanwhile; true if this call applied it. */
async function applyOnce(db: Db, name: string, wait: typeof MIGRATION_LOCK_WAIT): Promise<boolean> {
  const statements = splitStatements(readFileSync(MIGRATIONS_DIR + name, 'utf8'));
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await db.tx(async (sql) => {
        await sql.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
        if ((await sql.query('SELECT 1 FROM schema_migrations WHERE name = $1', [name])).length > 0) return false;
        // After the migration lock, which waits for another node's migration as long as it takes.
        await sql.query(`SET LOCAL lock_timeout = ${Math.round(wait.timeoutMs)}`);
        for (const statement of statements) await sql.query(statement);
        await sql.query('INSERT INTO schema_migrations (name) VALUES ($1)', [name]);
        return true;
      }, MIGRATING);
    } catch (error) {
      if ((error as { code?: unknown } | null)?.code !== LOCK_NOT_AVAILABLE) throw error;
      if (attempt >= wait.attempts) {
        throw Object.assign(
          new Error(
            `Migration ${name} was not applied: its tables stayed locked by another transaction (${wait.attempts} tries, ${wait.timeoutMs} ms each). ` +
              'Start again once that transaction is over (pg_stat_activity shows it).',
            { cause: error },
          ),
          { code: LOCK_NOT_AVAILABLE },
        );
      }
      await sleep(wait.pauseMs);
    }
  }
}

/** Splits a migration on semicolons at line ends; our migrations hold no procedural bodies. */
function splitStatements(script: string): string[] {
  return script
    .replace(/^\s*--.*$/gm, '')
    .split(/;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
