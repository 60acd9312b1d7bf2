/** The PostgreSQL driver, on a `pg` pool. */
import pg from 'pg';
import type { Db, Sql } from './db.js';

// int8 columns (times in ms, money in micros) fit in a double; return numbers, as PGlite does.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export async function openPg(url: string, options: { max?: number } = {}): Promise<Db> {
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10 });
  // An idle client that loses its connection emits on the pool; without a listener it would crash
  // the process. The next query reconnects.
  pool.on('error', () => {});
  const probe = await pool.connect();
  probe.release();

  const asSql = (client: pg.Pool | pg.PoolClient): Sql => ({
    async query<T>(text: string, params?: readonly unknown[]) {
      const result = await client.query(text, params as unknown[] | undefined);
      return result.rows as T[];
    },
  });

  return {
    driver: 'pg',
    ...asSql(pool),
    async tx(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(asSql(client));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw error;
      } finally {
        client.release();
      }
    },
    async exec(script) {
      await pool.query(script);
    },
    async close() {
      await pool.end();
    },
  };
}
