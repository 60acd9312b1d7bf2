/**
 * Money (spec section 8, "call duration"): rates per destination prefix (longest match), the
 * affordable share of a wallet, and the provider time limit derived from the caps and that share.
 */
import { LIMITS } from '../../shared/limits.js';
import type { Sql } from '../store/index.js';

/** Per-minute rate in micros for a number, by longest matching prefix; null when none applies. */
export async function findRate(sql: Sql, e164: string): Promise<number | null> {
  const [row] = await sql.query<{ per_minute_micros: number }>(
    `SELECT per_minute_micros FROM rates WHERE $1 LIKE prefix || '%' ORDER BY length(prefix) DESC LIMIT 1`,
    [e164],
  );
  return row ? row.per_minute_micros : null;
}

/**
 * Seconds of talk the wallet pays for a call, at its own rate, when `wallet.planning` calls share
 * it and the calls already dialed have set `wallet.setAsideMicros` aside for their time limits; what
 * is not set aside is shared by the `wallet.undialed` calls not dialed yet, this one among them
 * (calls/wallet.ts). A free destination (rate 0) is limited only by the caps.
 */
export function affordableSeconds(balanceMicros: number, perMinuteMicros: number, wallet: { planning: number; undialed?: number; setAsideMicros?: number }): number {
  if (perMinuteMicros <= 0) return Number.POSITIVE_INFINITY;
  const balance = Math.max(0, balanceMicros);
  const free = Math.max(0, balance - (wallet.setAsideMicros ?? 0));
  const share = Math.min(balance / Math.max(1, wallet.planning), free / Math.max(1, wallet.undialed ?? 1));
  return Math.floor((share * 60) / perMinuteMicros);
}

/** The provider time limit: the smallest of the platform cap, the policy cap and the affordable share. */
export function timeLimitSeconds(policyCap: number, affordable: number): number {
  return Math.max(0, Math.floor(Math.min(LIMITS.platformMaxCallSeconds, policyCap, affordable)));
}

/** What a call of `seconds` costs, rounded up to the micro. */
export function chargeMicros(seconds: number, perMinuteMicros: number): number {
  return Math.ceil((seconds * perMinuteMicros) / 60);
}
