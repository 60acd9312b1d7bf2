/**
 * The rate limits of spec section 8 on the socket, counted in the windows REST counts in
 * (api/ratelimit/keys.ts):
 * - a widget command counts against its client address's widget limit, as a REST request does;
 * - an engine's heartbeat counts against the engine's limit; its acks of pushed commands count on a
 *   budget of their own, so that a flood of commands cannot starve its heartbeats (a window on a
 *   call that cannot heartbeat loses the call after 30 s).
 * Handshakes: one refused for a bad credential counts against its address, and an address over
 * that limit is refused before its token is read (api/ratelimit/refusals.ts). So is a handshake
 * from an address with too many being checked on this node at once, since none of those has been
 * counted yet: a flood of made-up tokens from one address so costs the store at most that limit
 * plus the handshakes in flight on each node, per window. Handshakes that pass count against no
 * address's rate (only against their credential's sockets, below), and REST's traffic does not
 * block them: a call centre's agents share one address, and all reconnect within seconds after a
 * gateway restart. An engine's reconnection counts with its heartbeats, though: its first `work`
 * is what a heartbeat reads from the store, and a window reconnecting in a loop must not read it
 * more often than REST would let it. Only a connection within a rate window of the engine's last
 * socket closing here counts: the first one (a window opening, every window after a gateway
 * restart) costs no count, and the node keeps no count for the engines it holds.
 * Sockets: a credential holds at most config.socketsPerCredential on a node (by default
 * LIMITS.socketsPerCredentialPerNode; not a rate, so C2C_RATE_LIMIT_SCALE leaves it alone), counted
 * here without Redis (each node guards its own memory).
 * Like REST, nothing is counted while the counter (Redis) is unreachable.
 */
import { LIMITS } from '../shared/limits.js';
import type { Services } from '../api/services.js';
import { addressKey, RATE_KEYS } from '../api/ratelimit/keys.js';
import { rateLimited, scaledLimit } from '../api/ratelimit/counter.js';
import { RefusedCredentials } from '../api/ratelimit/refusals.js';

/** What an address with too many handshakes in flight is told to wait. */
const IN_FLIGHT_RETRY_MS = 1000;
/** What a credential holding all the sockets it may is told to wait: a stale socket of its goes within its ping timeout. */
const SOCKETS_HELD_RETRY_MS = 20_000;

export class SocketLimits {
  /** per client address (an IPv6 one by its /64: addressKey), its handshakes being checked (or their refusals counted) on this node */
  readonly #inFlight = new Map<string, number>();
  /** per credential, its sockets past the handshake that are not yet connected (so not yet in LocalSockets) */
  readonly #connecting = new Map<string, number>();
  readonly #refusals: RefusedCredentials;
  /** per engine, when its last socket on this node closed (oldest first), for a rate window */
  readonly #engineLeft = new Map<string, number>();

  constructor(private readonly services: Services) {
    this.#refusals = new RefusedCredentials(services.counter, services.clock, services.config.rateLimitScale);
  }

  async widgetCommand(ip: string): Promise<void> {
    await this.#count(RATE_KEYS.widgetPerIp(ip), LIMITS.widgetPerIpPerMinute);
  }

  async engineHeartbeat(engineId: string): Promise<void> {
    await this.#count(RATE_KEYS.enginePerEngine(engineId), LIMITS.enginePerEnginePerMinute);
  }

  /** An engine's socket that passed its handshake, before its first `work` is read: counted if it is a reconnection. */
  async engineConnect(engineId: string): Promise<void> {
    const left = this.#engineLeft.get(engineId);
    if (left === undefined || this.services.clock.now() - left > LIMITS.rateWindowMs) return;
    await this.#count(RATE_KEYS.enginePerEngine(engineId), LIMITS.enginePerEnginePerMinute);
  }

  /** An engine's socket on this node closed. */
  engineLeft(engineId: string): void {
    const now = this.services.clock.now();
    // kept in the order they left: those past the window are at the front
    for (const [id, at] of this.#engineLeft) {
      if (now - at <= LIMITS.rateWindowMs) break;
      this.#engineLeft.delete(id);
    }
    this.#engineLeft.delete(engineId);
    this.#engineLeft.set(engineId, now);
  }

  async engineAcks(engineId: string): Promise<void> {
    await this.#count(RATE_KEYS.engineAcks(engineId), LIMITS.enginePerEnginePerMinute);
  }

  /**
   * Before a handshake's token is read: throws rate_limited for an address over its limit of
   * refused credentials, or with too many handshakes in flight here; otherwise the handshake is in
   * flight until handshakeDone().
   */
  admitHandshake(ip: string): void {
    this.#refusals.assertAllowed(ip);
    const address = addressKey(ip);
    const inFlight = this.#inFlight.get(address) ?? 0;
    // at least one, whatever the scale: none would refuse every handshake
    if (inFlight >= Math.max(1, this.#scaled(LIMITS.handshakesInFlightPerIp))) throw rateLimited(IN_FLIGHT_RETRY_MS);
    this.#inFlight.set(address, inFlight + 1);
  }

  /**
   * An admitted handshake is over; a refused one counts. A refused handshake stays in flight until
   * it is counted, so that the handshakes admitted meanwhile stay within the cap.
   */
  async handshakeDone(ip: string, refused: boolean): Promise<void> {
    try {
      if (refused) await this.#refusals.refused(ip);
    } finally {
      const address = addressKey(ip);
      const inFlight = (this.#inFlight.get(address) ?? 1) - 1;
      if (inFlight > 0) this.#inFlight.set(address, inFlight);
      else this.#inFlight.delete(address);
    }
  }

  /**
   * After a handshake's credential passed: throws rate_limited if the credential (`owner`) holds
   * all the sockets it may on this node, `held` connected and those still connecting; otherwise
   * the socket is connecting until the returned function is called (once it is connected, and so
   * counted in `held`, or gone).
   */
  admitSocket(owner: string, held: number): () => void {
    const connecting = this.#connecting.get(owner) ?? 0;
    if (held + connecting >= this.services.config.socketsPerCredential) {
      throw rateLimited(SOCKETS_HELD_RETRY_MS, `This credential holds ${held + connecting} sockets on this node, the most it may; close one, or wait.`);
    }
    this.#connecting.set(owner, connecting + 1);
    return () => {
      const left = (this.#connecting.get(owner) ?? 1) - 1;
      if (left > 0) this.#connecting.set(owner, left);
      else this.#connecting.delete(owner);
    };
  }

  async #count(key: string, perMinute: number): Promise<void> {
    const limit = this.#scaled(perMinute);
    // As on REST: losing Redis must not take sockets down with it, so nothing is counted then.
    const hit = await this.services.counter.hit(key, LIMITS.rateWindowMs, limit).catch(() => undefined);
    if (hit && hit.count > limit) throw rateLimited(hit.resetMs);
  }

  #scaled(limit: number): number {
    return scaledLimit(limit, this.services.config.rateLimitScale);
  }
}
