/** Phone numbers: E.164 validity and country (libphonenumber-js, full metadata), and masking. */
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import type { NumberVisibility } from '../../shared/types.js';

const E164 = /^\+[1-9]\d{6,14}$/;

export interface ParsedNumber {
  e164: string;
  /** ISO 3166-1 alpha-2, or null for non-geographic numbers */
  country: string | null;
  /** a premium-rate number (libphonenumber's type: +1 900, UK 09, FR 089...), whose owner is paid per minute called */
  premiumRate: boolean;
}

/** A valid E.164 number, or null. The text must already be in E.164 form (no spaces). */
export function parseE164(text: string): ParsedNumber | null {
  if (!E164.test(text)) return null;
  const parsed = parsePhoneNumberFromString(text);
  if (!parsed || !parsed.isValid() || parsed.number !== text) return null;
  return { e164: parsed.number, country: parsed.country ?? null, premiumRate: parsed.getType() === 'PREMIUM_RATE' };
}

const BULLET = '\u2022';

/**
 * What the agent's browser may see of a number: all of it, nothing (null), or the country code
 * and last four digits with the rest as bullets ("+44••••••0123").
 */
export function displayNumber(e164: string | null, visibility: NumberVisibility): string | null {
  if (e164 === null || visibility === 'hide') return null;
  if (visibility === 'show') return e164;
  const parsed = parsePhoneNumberFromString(e164);
  const code = parsed?.countryCallingCode ?? '';
  const national = e164.slice(1 + code.length);
  const keep = Math.min(4, Math.max(0, national.length - 2));
  return `+${code}${BULLET.repeat(national.length - keep)}${national.slice(national.length - keep)}`;
}
