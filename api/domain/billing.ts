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

/** Seconds of talk `shareMicros` pays for at a rate; a free destination (rate 0) is limited only by the caps. */
export function affordableSeconds(shareMicros: number, perMinuteMicros: number): number {
  if (perMinuteMicros <= 0) return Number.POSITIVE_INFINITY;
  return Math.floor((Math.max(0, shareMicros) * 60) / perMinuteMicros);
}

/** The provider time limit: the smallest of the platform cap, the policy cap and the affordable share. */
export function timeLimitSeconds(policyCap: number, affordable: number): number {
  return Math.max(0, Math.floor(Math.min(LIMITS.platformMaxCallSeconds, policyCap, affordable)));
}

/** What a call of `seconds` costs, rounded up to the micro. */
export function chargeMicros(seconds: number, perMinuteMicros: number): number {
  return Math.ceil((seconds * perMinuteMicros) / 60);
}
