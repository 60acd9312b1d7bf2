/**
 * The embedded driver: PGlite (PostgreSQL compiled to WASM), persisted to a directory so a restart
 * loses nothing. It holds one connection; PGlite serializes queries and transactions, which is
 * what a single-node deployment needs.
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { lockDataDir } from './data-dir-lock.js';
import type { Db, Sql } from './db.js';

/** dataDir undefined = in memory (tests). A directory is locked while open (data-dir-lock.ts). */
export async function openPglite(dataDir?: string): Promise<Db> {
  let release = () => {};
  if (dataDir) {
    // PGlite writes its files world-readable and world-writable (0666, whatever the umask), and
    // they hold provider auth tokens and credential hashes: the directory keeps other users out.
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    chmodSync(dataDir, 0o700);
    release = await lockDataDir(dataDir);
  }
  let pglite: PGlite;
  try {
    pglite = dataDir ? new PGlite(dataDir) : new PGlite();
    await pglite.waitReady;
  } catch (error) {
    release();
    throw error;
  }

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
      try {
        await pglite.close();
      } finally {
        release();
      }
    },
  };
}
