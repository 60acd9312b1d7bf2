/**
 * The rate limits of spec section 8 on the socket, counted in the windows REST counts in
 * (api/ratelimit/keys.ts):
 * - a widget command counts against its client address's widget limit, as a REST request does;
 * - an engine's heartbeat counts against the engine's limit; its acks of pushed commands count on a
 *   budget of their own, so that a flood of commands cannot starve its heartbeats (a window on a
 *   call that cannot heartbeat loses the call after 30 s).
 * Refused handshakes (a bad, expired or revoked token, a wrong origin, an engine off its pages)
 * count per client address on a key of their own (LIMITS.refusedHandshakesPerIpPerMinute,
 * decided); once an address is over it, every handshake from it is refused rate_limited (a retry
 * reason, with retry_after) before its token is read, until the window ends. So is a handshake from
 * an address with too many being checked on this node at once, since none of those has been
 * counted yet. A flood of made-up tokens from one address so costs the store at most the limit (the
 * count is shared by every node) plus the handshakes in flight on each node, per window. Handshakes that pass do not count, and REST's traffic does not
 * block them: a call centre's agents share one address, and all reconnect within seconds after a
 * gateway restart.
 * Like REST, nothing is counted while the counter (Redis) is unreachable.
 */
import { C2CError } from '../shared/errors.js';
import { LIMITS } from '../shared/limits.js';
import type { Services } from '../api/services.js';
import { RATE_KEYS } from '../api/ratelimit/keys.js';

/** Past this many blocked addresses, the ones whose window has ended are forgotten, at most once a second. */
const SWEEP_ABOVE = 1000;
const SWEEP_EVERY_MS = 1000;
/** What an address with too many handshakes in flight is told to wait. */
const IN_FLIGHT_RETRY_MS = 1000;

export class SocketLimits {
  /** per client address over its limit of refused handshakes: when its window ends (clock ms) */
  readonly #blocked = new Map<string, number>();
  /** per client address, its handshakes being checked on this node */
  readonly #inFlight = new Map<string, number>();
  #sweptAt = 0;

  constructor(private readonly services: Services) {}

  async widgetCommand(ip: string): Promise<void> {
    await this.#count(RATE_KEYS.widgetPerIp(ip), LIMITS.widgetPerIpPerMinute);
  }

  async engineHeartbeat(engineId: string): Promise<void> {
    await this.#count(RATE_KEYS.enginePerEngine(engineId), LIMITS.enginePerEnginePerMinute);
  }

  async engineAcks(engineId: string): Promise<void> {
    await this.#count(RATE_KEYS.engineAcks(engineId), LIMITS.enginePerEnginePerMinute);
  }

  /**
   * Before a handshake's token is read: throws rate_limited for an address blocked for its refused
   * handshakes, or with too many in flight here; otherwise the handshake is in flight until
   * handshakeDone().
   */
  admitHandshake(ip: string): void {
    const until = this.#blocked.get(ip);
    if (until !== undefined) {
      const left = until - this.services.clock.now();
      if (left > 0) throw rateLimited(left);
      this.#blocked.delete(ip);
    }
    const inFlight = this.#inFlight.get(ip) ?? 0;
    // at least one, whatever the scale: none would refuse every handshake
    if (inFlight >= Math.max(1, this.#scaled(LIMITS.handshakesInFlightPerIp))) throw rateLimited(IN_FLIGHT_RETRY_MS);
    this.#inFlight.set(ip, inFlight + 1);
  }

  /**
   * An admitted handshake is over; a refused one counts, and one that takes the address over the
   * limit blocks it until the window ends. A refused handshake stays in flight until it is counted,
   * so that the handshakes admitted meanwhile stay within the cap.
   */
  async handshakeDone(ip: string, refused: boolean): Promise<void> {
    try {
      if (refused) await this.#countRefusal(ip);
    } finally {
      const inFlight = (this.#inFlight.get(ip) ?? 1) - 1;
      if (inFlight > 0) this.#inFlight.set(ip, inFlight);
      else this.#inFlight.delete(ip);
    }
  }

  async #countRefusal(ip: string): Promise<void> {
    const resetMs = await this.#over(RATE_KEYS.refusedHandshakesPerIp(ip), LIMITS.refusedHandshakesPerIpPerMinute);
    if (resetMs === undefined) return;
    const now = this.services.clock.now();
    if (this.#blocked.size >= SWEEP_ABOVE && now - this.#sweptAt >= SWEEP_EVERY_MS) {
      this.#sweptAt = now;
      for (const [address, until] of this.#blocked) if (until <= now) this.#blocked.delete(address);
    }
    this.#blocked.set(ip, now + resetMs);
  }

  async #count(key: string, perMinute: number): Promise<void> {
    const resetMs = await this.#over(key, perMinute);
    if (resetMs !== undefined) throw rateLimited(resetMs);
  }

  /** Counts a hit; when it is over the limit, the milliseconds until the window ends. */
  async #over(key: string, perMinute: number): Promise<number | undefined> {
    const limit = this.#scaled(perMinute);
    // As on REST: losing Redis must not take sockets down with it, so nothing is counted then.
    const hit = await this.services.counter.hit(key, LIMITS.rateWindowMs, limit).catch(() => undefined);
    return hit && hit.count > limit ? hit.resetMs : undefined;
  }

  #scaled(limit: number): number {
    return Math.round(limit * this.services.config.rateLimitScale);
  }
}

function rateLimited(resetMs: number): C2CError {
  return new C2CError('rate_limited', undefined, { retryAfter: Math.max(1, Math.ceil(resetMs / 1000)) });
}
