/**
 * Bearer credentials: prefix + 16-char lookup + 32-char secret, from the CSPRNG (nanoid). The
 * lookup finds the row through an index; the secret is stored only as SHA-256 and compared in
 * constant time, so neither the database nor response timing reveals it.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import { customAlphabet } from 'nanoid';
import { CREDENTIAL_PREFIX, type CredentialKind } from '../../shared/prefixes.js';

const ALPHANUMERIC = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const LOOKUP_LENGTH = 16;
const SECRET_LENGTH = 32;
const lookupId = customAlphabet(ALPHANUMERIC, LOOKUP_LENGTH);
const secretPart = customAlphabet(ALPHANUMERIC, SECRET_LENGTH);
const publicId = customAlphabet(ALPHANUMERIC, 20);

/** A new public record id such as `ci_…` (not a secret). */
export function newId(prefix: string): string {
  return prefix + publicId();
}

export interface MintedCredential {
  /** shown once to its holder, never stored */
  token: string;
  lookup: string;
  secretHash: Buffer;
}

export function mintCredential(kind: CredentialKind): MintedCredential {
  const lookup = lookupId();
  const secret = secretPart();
  return { token: CREDENTIAL_PREFIX[kind] + lookup + secret, lookup, secretHash: sha256(secret) };
}

export interface PresentedCredential {
  lookup: string;
  secretHash: Buffer;
}

/** Splits a presented token; null when it is not of this kind or shape. */
export function parseCredential(kind: CredentialKind, token: string | undefined): PresentedCredential | null {
  const prefix = CREDENTIAL_PREFIX[kind];
  if (!token || !token.startsWith(prefix) || token.length !== prefix.length + LOOKUP_LENGTH + SECRET_LENGTH) return null;
  const body = token.slice(prefix.length);
  if (!/^[0-9A-Za-z]+$/.test(body)) return null;
  return { lookup: body.slice(0, LOOKUP_LENGTH), secretHash: sha256(body.slice(LOOKUP_LENGTH)) };
}

/**
 * A stored secret hash in memory of its own, for the credential caches. The store drivers hand
 * bytea values over as views into buffers they share (pg's into an 8 KB slab of Node's buffer
 * pool), which a cached view keeps alive whole: some 170 bytes per cached credential. A copy of
 * 32 bytes lives on V8's heap.
 */
export function ownCopy(stored: Uint8Array): Uint8Array {
  return new Uint8Array(stored);
}

/** Constant-time comparison of the stored and presented secret hashes. */
export function secretMatches(stored: Uint8Array, presented: PresentedCredential): boolean {
  const storedBuffer = Buffer.from(stored);
  return storedBuffer.length === presented.secretHash.length && timingSafeEqual(storedBuffer, presented.secretHash);
}

export function sha256(text: string): Buffer {
  // the one-shot hash is markedly cheaper than createHash() on the per-request path
  return hash('sha256', text, 'buffer');
}

/** Reads `Authorization: Bearer <token>`. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}
