/**
 * The embedded driver: PGlite (PostgreSQL compiled to WASM), persisted to a directory so a restart
 * loses nothing. It holds one connection; PGlite serializes queries and transactions, which is
 * what a single-node deployment needs.
 */
import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import type { Db, Sql } from './db.js';

/** dataDir undefined = in memory (tests). */
export async function openPglite(dataDir?: string): Promise<Db> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const pglite = dataDir ? new PGlite(dataDir) : new PGlite();
  await pglite.waitReady;

  const asSql = (target: Pick<PGlite, 'query'>): Sql => ({
    async query<T>(text: string, params?: readonly unknown[]) {
      const result = await target.query<T>(text, params as unknown[] | undefined);
      return result.rows;
    },
  });

  return {
    driver: 'pglite',
    // In the process: never out of reach.
    unavailableCount: () => 0,
    ...asSql(pglite),
    tx: (fn, options) =>
      pglite.transaction(async (tx) => {
        if (options?.lock) await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [options.lock]);
        return fn(asSql(tx));
      }),
    async exec(script) {
      await pglite.exec(script);
    },
    async close() {
      await pglite.close();
    },
  };
}
