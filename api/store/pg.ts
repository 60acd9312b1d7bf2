/** The PostgreSQL driver, on a `pg` pool. */
import pg from 'pg';
import type { Db, Sql } from './db.js';

// int8 columns (times in ms, money in micros) fit in a double; return numbers, as PGlite does.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/**
 * Parameterised statements run as named prepared statements: each connection parses and plans a
 * statement once instead of on every call, which is most of PostgreSQL's CPU for the short
 * statements of a heartbeat or a command. The set of statements is fixed by the code, so the
 * names stay few.
 */
const statementNames = new Map<string, string>();
const statementName = (text: string) => {
  let name = statementNames.get(text);
  if (!name) statementNames.set(text, (name = `c2c_${statementNames.size}`));
  return name;
};

export async function openPg(url: string, options: { max?: number } = {}): Promise<Db> {
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10 });
  // A client that loses its connection emits 'error': an idle one on the pool, one checked out (a
  // transaction in progress) on itself only, where the pool removes its own listener. Without a
  // listener either would stop the process; the statement in flight fails with the error anyway,
  // and the pool drops the dead client when it is released. The next query reconnects.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const probe = await pool.connect();
  probe.release();

  const asSql = (client: pg.Pool | pg.PoolClient): Sql => ({
    async query<T>(text: string, params?: readonly unknown[]) {
      const result = params?.length
        ? await client.query({ name: statementName(text), text, values: params as unknown[] })
        : await client.query(text);
      return result.rows as T[];
    },
  });

  return {
    driver: 'pg',
    ...asSql(pool),
    async tx(fn, options) {
      const client = await pool.connect();
      try {
        // The lock is taken in the same round trip as BEGIN (a simple query: no parameters).
        await client.query(options?.lock ? `BEGIN; SELECT pg_advisory_xact_lock(hashtext(${client.escapeLiteral(options.lock)}))` : 'BEGIN');
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
