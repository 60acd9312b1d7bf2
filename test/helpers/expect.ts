/** Assertions on the spec's error envelope. */
import { expect } from 'vitest';
import { ERROR_CATALOGUE, type ErrorCode } from '../../shared/errors.js';
import type { Reply } from './harness.js';

/** The reply is the envelope {ok:false, error, message} with this status and code. */
export async function expectError(reply: Reply | Promise<Reply>, status: number, code: ErrorCode): Promise<Reply> {
  const r = await reply;
  expect({ status: r.status, error: r.body?.error }, JSON.stringify(r.body)).toEqual({ status, error: code });
  expect(r.body.ok).toBe(false);
  expect(typeof r.body.message).toBe('string');
  expect(r.body.message.length).toBeGreaterThan(0);
  expect(Object.keys(r.body).sort()).toEqual(['error', 'message', 'ok']);
  // the catalogue's status, unless HTTP has its own word for the refusal (api/http/errors.ts)
  if (!HTTP_OWN_STATUSES.has(status)) expect(ERROR_CATALOGUE[code].status).toBe(status);
  return r;
}

/** 413: a body too large, answered with the catalogue's invalid_request. */
const HTTP_OWN_STATUSES: ReadonlySet<number> = new Set([413]);
