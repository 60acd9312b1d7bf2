/** The PostgreSQL driver, on a `pg` pool. */
import type { EventEmitter } from 'node:events';
import pg from 'pg';
import { C2CError } from '../../shared/errors.js';
import { PG_DEFAULTS, STORE_READ_ONLY, type Db, type Sql } from './db.js';

// int8 columns (times in ms, money in micros) fit in a double; return numbers, as PGlite does.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/**
 * Parameterised statements run as named prepared statements: each connection parses and plans a
 * statement once instead of on every call, which is most of PostgreSQL's CPU for the short
 * statements of a heartbeat or a command. The set of statements is fixed by the code, so the
 * names stay few. A statement prepared before a migration changed what it returns (a column added
 * to a table it reads with `*`: a rolling deploy, the first new node migrating while old ones
 * serve) fails once PostgreSQL sees it (planOutdated); then every connection made before is
 * retired, and the statement is run again on a new one, or its transaction answered 503.
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
  /**
   * a statement with no answer this long fails on our side: the statement timeout is the server's,
   * and a server cut off by the network never sends its error (default: the statement timeout + 5 s)
   */
  queryTimeoutMs?: number;
}

/** The query timeout of an `untimed` transaction's statements (migrations): a day; others keep the pool's. */
const UNTIMED = { query_timeout: 24 * 3600 * 1000 } as const;
const POOL_TIMEOUT = {} as const;

/** The database being out of reach or stuck: 503 service_unavailable, retry shortly. */
export class StoreUnavailable extends C2CError {
  /**
   * The database could not be reached or did not answer, as opposed to a statement it cancelled
   * (its statement timeout: a lock wait, perhaps on one row): every statement now would fail alike.
   */
  readonly outOfReach: boolean;
  constructor(cause: unknown) {
    const code = (cause as { code?: unknown } | null)?.code;
    const outdated = planOutdated(cause);
    const conflict = typeof code === 'string' && CONFLICTS.has(code);
    const message =
      code === READ_ONLY_TRANSACTION ? STORE_READ_ONLY : outdated ? SCHEMA_CHANGED : conflict ? CONFLICTED : 'The database is not answering; retry shortly.';
    super('service_unavailable', message, { retryAfter: 1, cause });
    this.outOfReach = code !== STATEMENT_CANCELLED && !outdated && !conflict;
  }
}

/** How long Db.reachable waits for the server to say anything on its own connection. */
export const REACHABLE_WITHIN_MS = 2_000;

/** How long closing the store waits for statements still running before it cuts their connections. */
export const CLOSE_WAIT_MS = 2_000;

const SCHEMA_CHANGED = 'The database was upgraded while this request ran; retry it.';
const CONFLICTED = 'The database gave way to a change made at the same moment; retry it.';

/**
 * SQLSTATEs deadlock_detected and serialization_failure: PostgreSQL ended this transaction so that
 * another could go on. Nothing of it was kept, and the same request made again succeeds: a 503 to
 * retry, not a 500. (Statements take their rows in key order so that these stay rare.)
 */
const CONFLICTS = new Set(['40P01', '40001']);

/** SQLSTATE query_canceled: the statement timeout (or a cancel) ended the statement, not the connection. */
const STATEMENT_CANCELLED = '57014';

/**
 * SQLSTATE read_only_sql_transaction: a write on a standby (a node left on the old primary after a
 * failover) or on a database set read-only. Every write fails alike until it is writable again.
 */
const READ_ONLY_TRANSACTION = '25006';

/**
 * SQLSTATEs of too many connections, a statement timeout or cancel, a store taking no writes, a
 * transaction ended for another's sake (CONFLICTS); and the classes of a lost or refused
 * connection (08) and of a server stopping, starting, dropping the database or ending an idle
 * session (57P).
 */
const UNAVAILABLE_SQLSTATES = new Set(['25006', '40001', '40P01', '53300', '57014']);
const UNAVAILABLE_SQLSTATE_CLASSES = /^(08(?!P01)|57P)/; // 08P01, a protocol violation, is a client's bug: 500
/** The network's words for a server out of reach, a name that does not resolve (for now) included. */
const UNAVAILABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'EHOSTDOWN', 'ENETUNREACH', 'ENETDOWN', 'ENOTFOUND', 'EAI_AGAIN']);
/** pg's and pg-pool's own messages: no connection in time, a connection lost mid-statement, no answer in time. */
const UNAVAILABLE_MESSAGES = /timeout exceeded when trying to connect|Connection terminated|not queryable|Query read timeout/;

/**
 * SQLSTATE feature_not_supported with this message: a prepared statement whose result columns a
 * schema change altered. Inside a transaction it fails again on every try on that connection (the
 * re-planning is rolled back with the transaction), so its connection is given up.
 */
function planOutdated(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return code === '0A000' && typeof message === 'string' && message.includes('cached plan must not change result type');
}

/** Whether an error says the database is out of reach or stuck for now, not that a statement is wrong. */
function isUnavailable(error: unknown): boolean {
  if (error instanceof StoreUnavailable) return true;
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (UNAVAILABLE_SQLSTATES.has(code) || UNAVAILABLE_SQLSTATE_CLASSES.test(code) || UNAVAILABLE_ERRNOS.has(code))) return true;
  return typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message);
}

/**
 * Whether the connection itself can no longer be trusted: no answer came (its statement may still
 * be running), or the link or the server went away. A statement the server cancelled (its own
 * timeout) leaves a sound connection, which a ROLLBACK makes ready again.
 */
function inDoubt(error: unknown): boolean {
  const cause = error instanceof StoreUnavailable ? error.cause : error;
  const { code, message } = (cause ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (UNAVAILABLE_ERRNOS.has(code) || code.startsWith('08') || code.startsWith('57P'))) return true;
  return typeof message === 'string' && /Query read timeout|Connection terminated|not queryable/.test(message);
}


/**
 * Whether a connection is to be replaced rather than given back: one in doubt, or one that found
 * the database read-only. `default_transaction_read_only` (ALTER DATABASE or ROLE … SET) applies
 * to sessions opened after it is set or reset: a pooled session kept after the database is
 * writable again would go on refusing every write on it, and the pool hands out the connection
 * given back last, so one kept busy (the reaper's statement every second) would never expire.
 */
function replaceConnection(error: unknown): boolean {
  const cause = error instanceof StoreUnavailable ? error.cause : error;
  return inDoubt(error) || (cause as { code?: unknown } | null)?.code === READ_ONLY_TRANSACTION;
}

export async function openPg(url: string, options: PgOptions = {}): Promise<Db> {
  const statementTimeoutMs = options.statementTimeoutMs ?? PG_DEFAULTS.statementTimeoutMs;
  const pool = new pg.Pool({
    connectionString: url,
    max: options.max ?? PG_DEFAULTS.poolSize,
    // Without these a PostgreSQL that stops answering (a network partition, a lock held for
    // minutes) leaves every request waiting, with no answer and no error.
    connectionTimeoutMillis: options.connectTimeoutMs ?? PG_DEFAULTS.connectTimeoutMs,
    statement_timeout: statementTimeoutMs,
    query_timeout: options.queryTimeoutMs ?? statementTimeoutMs + 5_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // Generic plans for every prepared statement. PostgreSQL settles on them by itself for the
    // single-row statements, but not for the batches (store/coalesce.ts: unnest() of arrays, `=
    // ANY($1)`): a custom plan sees how many rows a batch has and always looks cheaper than the
    // generic plan's guess of 10, so every batch was planned afresh, and planning cost three times
    // its execution (pg_stat_statements, 2026-11-23). The generic plan is the same shape (index
    // lookups per input row) for any batch size, and the statements are fixed by the code.
    options: '-c plan_cache_mode=force_generic_plan',
  });
  // A client that loses its connection emits 'error': an idle one on the pool, one checked out (a
  // transaction in progress) on itself only, where the pool removes its own listener. Without a
  // listener either would stop the process; the statement in flight fails with the error anyway,
  // and the pool drops the dead client when it is released. The next query reconnects.
  pool.on('error', () => {});
  /** bumped when a statement is found prepared for a schema since changed: connections made before are retired */
  let schemaGeneration = 0;
  const madeIn = new WeakMap<pg.PoolClient, number>();
  /** every connection the pool holds, idle or checked out: what close() cuts if it must */
  const connections = new Set<pg.PoolClient>();
  pool.on('connect', (client) => {
    client.on('error', () => {});
    madeIn.set(client, schemaGeneration);
    connections.add(client);
  });
  pool.on('remove', (client) => void connections.delete(client));
  /**
   * Retires every connection made no later than this one (a statement of it found the schema
   * changed): several that find it at once retire the same ones, not those made since.
   */
  const retireFrom = (client: pg.PoolClient) => {
    schemaGeneration = Math.max(schemaGeneration, (madeIn.get(client) ?? schemaGeneration) + 1);
  };
  /** A connection of the current schema generation (an older one, its prepared statements in doubt, is closed). */
  const checkout = async (): Promise<pg.PoolClient> => {
    for (;;) {
      const client = await pool.connect().catch((error: unknown) => {
        throw storeError(error);
      });
      if ((madeIn.get(client) ?? schemaGeneration) >= schemaGeneration) return client;
      client.release(true);
    }
  };
  /**
   * The database being out of reach is the service being unavailable (503, retry shortly), on every
   * path: REST, sockets, the gateway's handshake; each such failure is counted (/metrics). Other
   * errors (a unique violation the domain handles, a bug) pass through as they are.
   */
  let unavailable = 0;
  const storeError = (error: unknown): unknown => {
    if (!isUnavailable(error) || error instanceof StoreUnavailable) return error;
    unavailable += 1;
    return new StoreUnavailable(error);
  };

  const probe = await pool.connect();
  probe.release();

  /** One statement on a connection; `untimed` lifts our query timeout. Throws the driver's error as it is. */
  const run = async <T>(client: pg.PoolClient, text: string, params: readonly unknown[] | undefined, untimed: boolean): Promise<T[]> => {
    const timeout = untimed ? UNTIMED : POOL_TIMEOUT;
    const result = params?.length
      ? await client.query({ name: statementName(text), text, values: params as unknown[], ...timeout })
      : await client.query({ text, ...timeout });
    return result.rows as T[];
  };

  /** A transaction's statements, on its connection. */
  const inTransaction = (client: pg.PoolClient, untimed = false): Sql => ({
    async query<T>(text: string, params?: readonly unknown[]) {
      try {
        return await run<T>(client, text, params, untimed);
      } catch (error) {
        if (planOutdated(error)) {
          retireFrom(client);
          throw new StoreUnavailable(error);
        }
        throw storeError(error);
      }
    },
  });

  /**
   * A statement on a connection of its own, given back as soon as it is done (a connection in
   * doubt is closed). One that found its prepared statement outdated ran nothing: it runs again on
   * a connection made since.
   */
  async function query<T>(text: string, params?: readonly unknown[]): Promise<T[]> {
    for (let attempt = 1; ; attempt += 1) {
      const client = await checkout();
      let broken: Error | boolean = false;
      try {
        return await run<T>(client, text, params, false);
      } catch (error) {
        if (planOutdated(error)) {
          retireFrom(client);
          broken = true;
          if (attempt === 1) continue;
          throw new StoreUnavailable(error);
        }
        if (replaceConnection(error)) broken = error as Error;
        throw storeError(error);
      } finally {
        client.release(broken);
      }
    }
  }

  return {
    driver: 'pg',
    query,
    async tx(fn, options) {
      const client = await checkout();
      const sql = inTransaction(client, options?.untimed);
      // A connection in doubt (no answer came, or even the ROLLBACK failed) is dropped, which
      // rolls its transaction back; a sound one goes back to the pool.
      let broken: Error | undefined;
      try {
        // Set up in the same round trip as BEGIN (a simple query: no parameters): the statement
        // timeout lifted, the advisory lock taken.
        const setUp = [
          'BEGIN',
          ...(options?.untimed ? ['SET LOCAL statement_timeout = 0'] : []),
          ...(options?.lock ? [`SELECT pg_advisory_xact_lock(hashtext(${client.escapeLiteral(options.lock)}))`] : []),
        ];
        await sql.query(setUp.join('; '));
        const result = await fn(sql);
        const committed = await client.query({ text: 'COMMIT', ...(options?.untimed ? UNTIMED : POOL_TIMEOUT) }).catch((error: unknown) => {
          throw storeError(error);
        });
        // A transaction a failed statement aborted answers COMMIT with ROLLBACK, not an error: a
        // callback that caught that statement's error would otherwise be told its writes were kept.
        if (committed.command === 'ROLLBACK') throw new Error('The transaction was rolled back: a statement in it failed (its error was caught).');
        return result;
      } catch (error) {
        if (replaceConnection(error) || (error instanceof StoreUnavailable && planOutdated(error.cause))) broken = error as Error;
        else await client.query('ROLLBACK').catch((failed: Error) => void (broken = failed));
        throw error;
      } finally {
        client.release(broken);
      }
    },
    async exec(script) {
      await pool.query(script).catch((error: unknown) => {
        throw storeError(error);
      });
    },
    unavailableCount: () => unavailable,
    async reachable() {
      const probe = new pg.Client({ connectionString: url, connectionTimeoutMillis: REACHABLE_WITHIN_MS, query_timeout: REACHABLE_WITHIN_MS });
      probe.on('error', () => {});
      // Anything the server says is an answer, however slow its start-up under load (a server that
      // says something but does not finish within the time is busy, not out of reach).
      let heard = false;
      const connection = (probe as unknown as { connection: EventEmitter }).connection;
      connection.once('message', () => void (heard = true));
      connection.once('sslconnect', () => void (heard = true));
      try {
        await probe.connect();
        await probe.query('SELECT 1');
        return true;
      } catch (error) {
        // The server's own refusal (too many connections, starting up, a wrong password) is an
        // answer, and so is a connection refused: the host answered (PostgreSQL stopped or
        // restarting, which every node sees alike).
        return heard || error instanceof pg.DatabaseError || (error as { code?: unknown } | null)?.code === 'ECONNREFUSED';
      } finally {
        void probe.end().catch(() => {});
      }
    },
    async close() {
      // pool.end() waits for every statement still running: one a stopping node gave up on (a
      // catch-up on a struggling store) would hold the stop until its timeout, up to 15 s, past
      // the stop's own bound. After CLOSE_WAIT_MS their connections are cut, which rolls back
      // whatever they had open and fails their statements.
      const ended = pool.end();
      let waited: NodeJS.Timeout | undefined;
      const inTime = await Promise.race([ended.then(() => true), new Promise<false>((resolve) => (waited = setTimeout(resolve, CLOSE_WAIT_MS, false)))]);
      clearTimeout(waited);
      if (!inTime) for (const client of connections) void client.end().catch(() => {});
      await ended;
    },
  };
}
