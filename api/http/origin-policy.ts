/**
 * Which browser origins some active integration allows (spec section 5, rule 4), for CORS on the
 * API and the gateway. Every widget request asks, so a node holds the allowed origins of every
 * active integration, read in one statement when first asked and again after an integration
 * changes anywhere (bus message). No answer costs a store read of its own: a client sending a new
 * made-up Origin with every request (no browser does; a script may) costs the store nothing, and
 * every agent of a call centre polling at once after a node started shares one read.
 */
import { parseOrigin } from '../../shared/origin.js';
import type { Services } from '../services.js';

/** Every origin some active integration allows, and whether one of them allows all. */
interface AllowedOrigins {
  anyAllowsAll: boolean;
  origins: ReadonlySet<string>;
}

export class OriginPolicy {
  /** the current read, forgotten when an integration changes */
  #current: AllowedOrigins | null = null;
  /** the last read, current or not: what a caller that cannot wait is answered from */
  #last: AllowedOrigins | null = null;
  #reading: Promise<AllowedOrigins> | null = null;
  #generation = 0;

  constructor(private readonly services: Pick<Services, 'db' | 'bus'>) {
    services.bus.subscribe((message) => {
      if (message.type === 'integration' || message.type === 'resync') {
        this.#current = null;
        this.#reading = null;
        this.#generation += 1;
      }
    });
  }

  /** Whether some active integration allows this origin, as the store says now. Rejects when the store cannot be read. */
  async allows(origin: string): Promise<boolean> {
    const normalized = parseOrigin(origin);
    if (!normalized) return false;
    return admits(this.#fresh() ?? (await this.#read()), normalized);
  }

  /**
   * The current read, unless the bus is down: nothing would then say that an integration changed on
   * another node (an origin added, an integration enabled), so every answer reads the store (one
   * read at a time, shared), as the bus caches do; the reconnect's `resync` empties it.
   */
  #fresh(): AllowedOrigins | null {
    return this.services.bus.state() === 'up' ? this.#current : null;
  }

  /**
   * For callers that must answer at once: the answer of the last read, unless an integration has
   * changed since and it says no (an origin just added must not be refused). A yes that may be
   * stale is given (an origin just removed gets a few more; CORS is not what guards a token).
   * Undefined when there is no such answer yet, and a read is under way.
   */
  lastAnswer(origin: string): boolean | undefined {
    const current = this.#fresh();
    if (!current) this.#read().catch(() => undefined);
    const last = current ?? this.#last;
    const normalized = parseOrigin(origin);
    if (!normalized) return false;
    if (!last) return undefined;
    const allowed = admits(last, normalized);
    return allowed || current ? allowed : undefined;
  }

  /**
   * One read at a time. A read made while an integration changed is given to the requests waiting
   * on it but not kept, since it may predate the change; a failed one is not kept either, and the
   * next request reads again.
   */
  #read(): Promise<AllowedOrigins> {
    if (this.#reading) return this.#reading;
    const readIn = this.#generation;
    const reading: Promise<AllowedOrigins> = this.services.db
      .query<{ allow_all_origins: boolean; allowed_origins: string[] }>(
        `SELECT i.allow_all_origins, i.allowed_origins FROM integrations i JOIN accounts a ON a.id = i.account_id
         WHERE i.status = 'active' AND a.status = 'active' AND (i.allow_all_origins OR cardinality(i.allowed_origins) > 0)`,
      )
      .then((rows) => {
        const allowed = { anyAllowsAll: rows.some((row) => row.allow_all_origins), origins: new Set(rows.flatMap((row) => row.allowed_origins)) };
        if (readIn === this.#generation) this.#current = this.#last = allowed;
        return allowed;
      })
      .finally(() => void (this.#reading === reading && (this.#reading = null)));
    this.#reading = reading;
    return reading;
  }
}

const admits = (allowed: AllowedOrigins, origin: string) => allowed.anyAllowsAll || allowed.origins.has(origin);
