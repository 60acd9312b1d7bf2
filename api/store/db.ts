/**
 * The store interface: SQL over one of two drivers (PostgreSQL through `pg`, or PGlite embedded).
 * Domain services write plain PostgreSQL; both drivers run the same migrations and pass the same
 * driver suite (test/store/driver.suite.ts).
 */

export type Row = Record<string, unknown>;

export interface Sql {
  /** Run one statement with $1… parameters and return its rows. */
  query<T = Row>(text: string, params?: readonly unknown[]): Promise<T[]>;
}

export interface TxOptions {
  /** an advisory lock's name, such as `agent:<integration>:<member>` */
  lock?: string;
  /** statements may run as long as they need, past the driver's timeouts (migrations) */
  untimed?: boolean;
}

export interface Db extends Sql {
  readonly driver: 'pg' | 'pglite';
  /**
   * Run fn in one transaction; a throw rolls it back. With `lock`, the transaction first takes
   * the advisory lock named so (held until it ends): transactions on the same name run one by one.
   */
  tx<T>(fn: (sql: Sql) => Promise<T>, options?: TxOptions): Promise<T>;
  /** Run a script of several statements (migrations). */
  exec(script: string): Promise<void>;
  /** How many statements have failed since the store opened because the database was out of reach (each a 503). */
  unavailableCount(): number;
  /**
   * Whether the database's server answers at all, asked on a connection of its own, outside the
   * pool (which a busy node may have exhausted, or a server refusing connections may have left
   * empty: both answer, so neither is a lost network). False only when nothing answered in time.
   * Absent where there is no network to lose (PGlite).
   */
  reachable?(): Promise<boolean>;
  close(): Promise<void>;
}

/** PostgreSQL's SQLSTATE for a unique violation, the same on both drivers. */
export const UNIQUE_VIOLATION = '23505';

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: string; constraint?: string } | null;
  return e?.code === UNIQUE_VIOLATION && (constraint === undefined || e.constraint === constraint);
}

/** The first row, or undefined. */
export async function one<T = Row>(sql: Sql, text: string, params?: readonly unknown[]): Promise<T | undefined> {
  const rows = await sql.query<T>(text, params);
  return rows[0];
}

/**
 * Whether an error is the database out of reach (the drivers' StoreUnavailable with outOfReach):
 * no connection, no answer, a server going away. Not a statement it cancelled on its timeout, which
 * may be one row's lock.
 */
export function isStoreOutOfReach(error: unknown): boolean {
  const e = error as { code?: unknown; outOfReach?: unknown } | null;
  return e?.code === 'service_unavailable' && e.outOfReach === true;
}

/** Whether the server cancelled the statement on its statement timeout (SQLSTATE query_canceled): a lock waited on, or a store that cannot keep up. */
export function isStatementCancelled(error: unknown): boolean {
  const e = error as { code?: unknown; cause?: { code?: unknown } } | null;
  return e?.code === 'service_unavailable' && e.cause?.code === '57014';
}

/** How long PostgreSQL may take before a request gets 503 service_unavailable (config: DATABASE_*_TIMEOUT_MS), and the connections a node holds (DATABASE_POOL_SIZE). */
export const PG_DEFAULTS = { statementTimeoutMs: 10_000, connectTimeoutMs: 5_000, poolSize: 10 } as const;

export const STORE_READ_ONLY = 'The database takes no changes now (read-only); retry shortly.';

/**
 * For /healthz (API and gateway): the store answers and takes changes. One that answers reads but
 * refuses every write (a standby after a failover, a database set default_transaction_read_only)
 * is not a node to send clients to: 503, as if it did not answer.
 */
export async function checkStoreWritable(db: Db): Promise<void> {
  // A write that changes nothing: refused on a read-only session as every write is (503, the
  // driver's), so the driver replaces the session as it does after any refused write (a session
  // opened before the database was made writable again stays read-only: pg.ts).
  await db.query('UPDATE platform_settings SET id = id WHERE false');
}
