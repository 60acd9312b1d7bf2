/** The PostgreSQL driver, on a `pg` pool. */
import pg from 'pg';
import { C2CError } from '../../shared/errors.js';
import { PG_TIMEOUT_DEFAULTS, type Db, type Sql } from './db.js';

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

export interface PgOptions {
  /** connections in the pool */
  max?: number;
  /** PostgreSQL cancels a statement that runs (or waits on a lock) longer than this */
  statementTimeoutMs?: number;
  /** waiting longer than this for a connection (pool exhausted, server not answering) fails */
  connectTimeoutMs?: number;
}

/**
 * Errors that say the database is out of reach or stuck for now, not that a statement is wrong:
 * SQLSTATE class 08 (connection), 53300 (too many connections), 57014 (statement timeout or
 * cancel), 57P01–57P03 (shutting down, starting up); socket errors; the pool's connect timeout and
 * pg's messages for a connection lost mid-statement.
 */
function isUnavailable(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (code.startsWith('08') || ['53300', '57014', '57P01', '57P02', '57P03'].includes(code))) return true;
  if (typeof code === 'string' && ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND'].includes(code)) return true;
  return typeof message === 'string' && /timeout exceeded when trying to connect|Connection terminated|not queryable/.test(message);
}

/**
 * The database being out of reach is the service being unavailable (503, retry shortly), on every
 * path: REST, sockets, the gateway's handshake. Other errors (a unique violation the domain
 * handles, a bug) pass through as they are.
 */
function storeError(error: unknown): unknown {
  if (!isUnavailable(error)) return error;
  return new C2CError('service_unavailable', 'The database is not answering; retry shortly.', { retryAfter: 1, cause: error });
}

export async function openPg(url: string, options: PgOptions = {}): Promise<Db> {
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? 10,
    // Without these a PostgreSQL that stops answering (a network partition, a lock held for
    // minutes) leaves every request waiting, with no answer and no error.
    connectionTimeoutMillis: options.connectTimeoutMs ?? PG_TIMEOUT_DEFAULTS.connectTimeoutMs,
    statement_timeout: options.statementTimeoutMs ?? PG_TIMEOUT_DEFAULTS.statementTimeoutMs,
    keepAlive: true,
  });
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
      try {
        const result = params?.length
          ? await client.query({ name: statementName(text), text, values: params as unknown[] })
          : await client.query(text);
        return result.rows as T[];
      } catch (error) {
        throw storeError(error);
      }
    },
  });

  return {
    driver: 'pg',
    ...asSql(pool),
    async tx(fn, options) {
      const client = await pool.connect().catch((error: unknown) => {
        throw storeError(error);
      });
      try {
        // The lock is taken in the same round trip as BEGIN (a simple query: no parameters).
        await client.query(options?.lock ? `BEGIN; SELECT pg_advisory_xact_lock(hashtext(${client.escapeLiteral(options.lock)}))` : 'BEGIN');
        const result = await fn(asSql(client));
        await client.query('COMMIT');
        return result;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => {});
        throw storeError(error);
      } finally {
        client.release();
      }
    },
    async exec(script) {
      await pool.query(script).catch((error: unknown) => {
        throw storeError(error);
      });
    },
    async close() {
      await pool.end();
    },
  };
}
