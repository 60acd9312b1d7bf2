/**
 * The rate limits of spec section 8 on the socket, counted with REST's in one window per key
 * (api/ratelimit/keys.ts):
 * - a widget command counts against its client address's widget limit, as a REST request does;
 * - an engine's heartbeat or ack counts against the engine's limit;
 * - a refused handshake (a bad, expired or revoked token, a wrong origin) counts against its
 *   address's widget limit, and once that is over, every handshake from the address is refused
 *   rate_limited (a retry reason, with retry_after) before its token is looked at, until the window
 *   ends. A flood of made-up tokens so costs the store one read per allowed refusal. Handshakes that
 *   pass do not count: a call centre's agents behind one address all reconnect at once after a
 *   gateway restart, and each holds its socket for long.
 * Like REST, they count nothing while the counter (Redis) is unreachable.
 */
import { C2CError } from '../shared/errors.js';
import { LIMITS } from '../shared/limits.js';
import type { Services } from '../api/services.js';
import { RATE_KEYS } from '../api/ratelimit/keys.js';

/** Past this many blocked addresses, the ones whose window has ended are forgotten, at most once a second. */
const SWEEP_ABOVE = 1000;
const SWEEP_EVERY_MS = 1000;

export class SocketLimits {
  /** per client address over its limit through refused handshakes: when its window ends (clock ms) */
  readonly #blocked = new Map<string, number>();
  #sweptAt = 0;

  constructor(private readonly services: Services) {}

  async widgetCommand(ip: string): Promise<void> {
    const resetMs = await this.#over(RATE_KEYS.widgetPerIp(ip), LIMITS.widgetPerIpPerMinute);
    if (resetMs !== undefined) throw rateLimited(resetMs);
  }

  async engineRequest(engineId: string): Promise<void> {
    const resetMs = await this.#over(RATE_KEYS.enginePerEngine(engineId), LIMITS.enginePerEnginePerMinute);
    if (resetMs !== undefined) throw rateLimited(resetMs);
  }

  /** Throws rate_limited while this address's refused handshakes have it over its limit. */
  assertHandshakeAllowed(ip: string): void {
    const until = this.#blocked.get(ip);
    if (until === undefined) return;
    const left = until - this.services.clock.now();
    if (left > 0) throw rateLimited(left);
    this.#blocked.delete(ip);
  }

  /** Counts a refused handshake; an address it takes over the limit is refused from now until the window ends. */
  async handshakeRefused(ip: string): Promise<void> {
    const resetMs = await this.#over(RATE_KEYS.widgetPerIp(ip), LIMITS.widgetPerIpPerMinute);
    if (resetMs === undefined) return;
    const now = this.services.clock.now();
    if (this.#blocked.size >= SWEEP_ABOVE && now - this.#sweptAt >= SWEEP_EVERY_MS) {
      this.#sweptAt = now;
      for (const [address, until] of this.#blocked) if (until <= now) this.#blocked.delete(address);
    }
    this.#blocked.set(ip, now + resetMs);
  }

  /** Counts a hit; when it is over the limit, the milliseconds until the window ends. */
  async #over(key: string, perMinute: number): Promise<number | undefined> {
    const limit = Math.round(perMinute * this.services.config.rateLimitScale);
    // As on REST: losing Redis must not take sockets down with it, so nothing is counted then.
    const hit = await this.services.counter.hit(key, LIMITS.rateWindowMs, limit).catch(() => undefined);
    return hit && hit.count > limit ? hit.resetMs : undefined;
  }
}

function rateLimited(resetMs: number): C2CError {
  return new C2CError('rate_limited', undefined, { retryAfter: Math.max(1, Math.ceil(resetMs / 1000)) });
}
