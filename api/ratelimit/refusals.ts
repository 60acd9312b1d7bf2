/**
 * Credentials refused per client address, for the gateway's handshakes, which nothing else limits
 * before their token is read. Each bad credential (an unknown, expired or revoked token, a wrong
 * origin; isBadCredential) counts on the address's key (LIMITS.refusedCredentialsPerIpPerMinute,
 * decided; shared by every node through the counter); once the address is over it, the node that
 * saw it refuses the address's handshakes rate_limited before reading their token, until the
 * window ends. A flood of made-up tokens so costs the store a bounded number of reads, while
 * handshakes that pass count nothing here: a call centre's agents share one address. A blocked
 * client still has REST (it polls and heartbeats there): REST's engine routes are never limited
 * per address, since an address-wide refusal there would stop every window's heartbeats. Nothing
 * is counted while the counter (Redis) is unreachable.
 */
import { C2CError } from '../../shared/errors.js';
import { LIMITS } from '../../shared/limits.js';
import type { Clock } from '../clock.js';
import { rateLimited, scaledLimit, type RateCounter } from './counter.js';
import { addressKey, RATE_KEYS } from './keys.js';

/** Past this many blocked addresses, the ones whose window has ended are forgotten, at most once a second. */
const SWEEP_ABOVE = 1000;
const SWEEP_EVERY_MS = 1000;

export class RefusedCredentials {
  /** per client address over its limit (an IPv6 one by its /64: addressKey): when its window ends (clock ms) */
  readonly #blocked = new Map<string, number>();
  #sweptAt = 0;

  constructor(
    private readonly counter: RateCounter,
    private readonly clock: Clock,
    /** multiplies the limit (benchmarks drive thousands of agents from one address) */
    private readonly scale: number,
  ) {}

  /** Throws rate_limited while this address's refused credentials have it over its limit. */
  assertAllowed(ip: string): void {
    const address = addressKey(ip);
    const until = this.#blocked.get(address);
    if (until === undefined) return;
    const left = until - this.clock.now();
    if (left > 0) throw rateLimited(left);
    this.#blocked.delete(address);
  }

  /** Counts a refusal; one that takes the address over the limit blocks it until the window ends. */
  async refused(ip: string): Promise<void> {
    const limit = scaledLimit(LIMITS.refusedCredentialsPerIpPerMinute, this.scale);
    const hit = await this.counter.hit(RATE_KEYS.refusedCredentialsPerIp(ip), LIMITS.rateWindowMs, limit).catch(() => undefined);
    if (!hit || hit.count <= limit) return;
    const now = this.clock.now();
    if (this.#blocked.size >= SWEEP_ABOVE && now - this.#sweptAt >= SWEEP_EVERY_MS) {
      this.#sweptAt = now;
      for (const [address, until] of this.#blocked) if (until <= now) this.#blocked.delete(address);
    }
    this.#blocked.set(addressKey(ip), now + hit.resetMs);
  }
}

/**
 * Whether a refusal says the credential itself is bad (unknown, expired, revoked, or presented from
 * the wrong origin): what a flood of made-up tokens gets. A good token refused by policy (its
 * integration or member disabled, the platform switched off) is not counted: when an operator
 * disables an integration, every window of a call centre behind one address hears it at once.
 */
export function isBadCredential(error: unknown): boolean {
  return error instanceof C2CError && (error.code === 'unauthorized' || error.code === 'origin_not_allowed');
}

