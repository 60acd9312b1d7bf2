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
  expect(ERROR_CATALOGUE[code].status).toBe(status);
  return r;
}
