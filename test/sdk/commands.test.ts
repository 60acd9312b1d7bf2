/** Widget commands: retries keep the request_id; hangup is never reported done unless it was. */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { COMMAND_ATTEMPTS, COMMAND_RETRY_AFTER_MAX_MS, sendCommand, type CommandDeps } from '../../sdk/src/commands.js';
import type { Command } from '../../sdk/src/contract.js';
import { SdkError } from '../../sdk/src/http.js';
import { systemClock } from '../../sdk/src/timing.js';

const done = { ok: true as const, status: 'done' as const, command_id: 7 };
const answer = (body: unknown) => ({ status: 200, etag: null, body: body as never });

describe('sendCommand', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const deps = (over: Partial<CommandDeps>): CommandDeps => ({
    clock: systemClock,
    viaSocket: () => null,
    viaRest: async () => answer(done),
    rejected: async () => false,
    ...over,
  });

  it('retries a network failure with the same request_id until it is answered', async () => {
    const seen: Command[] = [];
    const viaRest = vi.fn(async (c: Command) => {
      seen.push({ ...c });
      if (seen.length < 3) throw new SdkError('unreachable', 'Failed to fetch', 0);
      return answer(done);
    });
    const result = sendCommand({ kind: 'mute', request_id: 'r-1' }, deps({ viaRest }));
    await vi.runAllTimersAsync();
    expect(await result).toEqual(done);
    expect(seen.map((c) => c.request_id)).toEqual(['r-1', 'r-1', 'r-1']);
  });

  it('moves from the socket to REST when the ack times out, with the same request_id', async () => {
    const ids: string[] = [];
    let socketUp = true;
    const viaSocket = vi.fn((c: Command) => {
      if (!socketUp) return null;
      ids.push('socket:' + c.request_id);
      socketUp = false;
      return Promise.reject(new SdkError('unreachable', 'no ack', 0));
    });
    const viaRest = vi.fn(async (c: Command) => {
      ids.push('rest:' + c.request_id);
      return answer({ ok: true, status: 'queued', command_id: 3 });
    });
    const result = sendCommand({ kind: 'answer', request_id: 'r-2' }, deps({ viaSocket, viaRest }));
    await vi.runAllTimersAsync();
    expect(await result).toMatchObject({ status: 'queued' });
    expect(ids).toEqual(['socket:r-2', 'rest:r-2']);
  });

  it("gives a socket's refusal the status REST answers its code with, and retries what REST's answer would retry", async () => {
    const refused = (error: string) => () => Promise.resolve({ ok: false as const, error, message: error });
    const viaRest = vi.fn(async () => answer(done));
    // as over REST: invalid_state is 409 and final; control_not_allowed 403
    // the refusal as the body, as REST's error carries the envelope it answered
    await expect(sendCommand({ kind: 'mute', request_id: 'r-4' }, deps({ viaSocket: refused('invalid_state'), viaRest }))).rejects.toMatchObject({
      code: 'invalid_state',
      status: 409,
      body: { ok: false, error: 'invalid_state', message: 'invalid_state' },
    });
    await expect(sendCommand({ kind: 'mute', request_id: 'r-5' }, deps({ viaSocket: refused('control_not_allowed'), viaRest }))).rejects.toMatchObject({ status: 403 });
    expect(viaRest).not.toHaveBeenCalled();
    // provider_unavailable is 503 over REST, which is retried: over the socket too (here, over REST once the socket is gone)
    let socketUp = true;
    const viaSocket = () => (socketUp ? ((socketUp = false), Promise.resolve({ ok: false as const, error: 'provider_unavailable', message: 'later' })) : null);
    const result = sendCommand({ kind: 'mute', request_id: 'r-6' }, deps({ viaSocket, viaRest }));
    await vi.runAllTimersAsync();
    expect(await result).toEqual(done);
    expect(viaRest).toHaveBeenCalledTimes(1);
  });

  it("retries over REST, with the same request_id, a command the socket's node answered it failed (its store out of reach): another node may take it", async () => {
    for (const error of ['service_unavailable', 'internal_error']) {
      const ids: string[] = [];
      const viaSocket = vi.fn((c: Command) => {
        ids.push('socket:' + c.request_id);
        return Promise.resolve({ ok: false as const, error, message: 'The store is out of reach.' });
      });
      const viaRest = vi.fn(async (c: Command) => {
        ids.push('rest:' + c.request_id);
        return answer(done);
      });
      const result = sendCommand({ kind: 'hangup', request_id: `r-node-${error}` }, deps({ viaSocket, viaRest }));
      await vi.runAllTimersAsync();
      expect(await result).toEqual(done);
      expect(ids).toEqual([`socket:r-node-${error}`, `rest:r-node-${error}`]);
    }
  });

  it('uses the socket ack as the answer, refusals included', async () => {
    const viaSocket = () => Promise.resolve({ ok: false as const, error: 'control_not_allowed', message: 'The policy does not enable mute.' });
    const viaRest = vi.fn();
    await expect(sendCommand({ kind: 'mute', request_id: 'r-3' }, deps({ viaSocket, viaRest }))).rejects.toMatchObject({ code: 'control_not_allowed' });
    expect(viaRest).not.toHaveBeenCalled();
  });

  it('does not retry a refusal', async () => {
    const viaRest = vi.fn(async () => {
      throw new SdkError('invalid_state', 'There is no connected call.', 409);
    });
    await expect(sendCommand({ kind: 'mute', request_id: 'r-4' }, deps({ viaRest }))).rejects.toMatchObject({ code: 'invalid_state' });
    expect(viaRest).toHaveBeenCalledTimes(1);
  });

  it('gives up after a few attempts with unreachable', async () => {
    const viaRest = vi.fn(async () => {
      throw new SdkError('unreachable', 'down', 0);
    });
    const result = sendCommand({ kind: 'availability', request_id: 'r-5', available: false }, deps({ viaRest }));
    const settled = result.catch((e) => e);
    await vi.runAllTimersAsync();
    expect(await settled).toMatchObject({ code: 'unreachable' });
    expect(viaRest).toHaveBeenCalledTimes(COMMAND_ATTEMPTS);
  });

  it('waits Retry-After on 429, plus a random share of up to half of it', async () => {
    for (const [random, waited] of [[0, 3000], [0.999, 4498]] as const) {
      const times: number[] = [];
      const viaRest = vi.fn(async () => {
        times.push(Date.now());
        if (times.length === 1) throw new SdkError('rate_limited', 'slow down', 429, 3);
        return answer(done);
      });
      const result = sendCommand({ kind: 'focus', request_id: 'r-6' }, deps({ viaRest, random: () => random }));
      await vi.runAllTimersAsync();
      await result;
      expect(times[1]! - times[0]!).toBe(waited);
    }
  });

  it('reports a Retry-After longer than COMMAND_RETRY_AFTER_MAX_MS at once, a hangup as refused (not uncertain)', async () => {
    for (const kind of ['focus', 'hangup'] as const) {
      const viaRest = vi.fn(async () => {
        throw new SdkError('rate_limited', 'slow down', 429, COMMAND_RETRY_AFTER_MAX_MS / 1000 + 1);
      });
      const result = sendCommand({ kind, request_id: `r-long-${kind}` } as Command, deps({ viaRest }));
      await expect(result).rejects.toMatchObject({ code: 'rate_limited', retryAfter: COMMAND_RETRY_AFTER_MAX_MS / 1000 + 1 });
      expect(viaRest).toHaveBeenCalledTimes(1);
    }
  });

  it("waits a socket answer's retry_after on rate_limited, as REST's Retry-After", async () => {
    const times: number[] = [];
    const viaSocket = vi.fn(() => {
      times.push(Date.now());
      return Promise.resolve(times.length === 1 ? { ok: false as const, error: 'rate_limited', message: 'Too many requests.', retry_after: 3 } : done);
    });
    const result = sendCommand({ kind: 'focus', request_id: 'r-6s' }, deps({ viaSocket, random: () => 0 }));
    await vi.runAllTimersAsync();
    expect(await result).toEqual(done);
    expect(times[1]! - times[0]!).toBe(3000);
  });

  it('reports a 502 hangup as hangup_uncertain, never as done, and does not retry it', async () => {
    const viaRest = vi.fn(async () => {
      throw new SdkError('hangup_uncertain', 'The voice provider could not be reached', 502);
    });
    await expect(sendCommand({ kind: 'hangup', request_id: 'r-7' }, deps({ viaRest }))).rejects.toMatchObject({ code: 'hangup_uncertain' });
    expect(viaRest).toHaveBeenCalledTimes(1);
    const bare502 = vi.fn(async () => {
      throw new SdkError('unreachable', 'Bad Gateway', 502);
    });
    await expect(sendCommand({ kind: 'hangup', request_id: 'r-8' }, deps({ viaRest: bare502 }))).rejects.toMatchObject({ code: 'hangup_uncertain' });
    const viaSocket = () => Promise.resolve({ ok: false as const, error: 'hangup_uncertain', message: 'provider down' });
    await expect(sendCommand({ kind: 'hangup', request_id: 'r-9' }, deps({ viaSocket }))).rejects.toMatchObject({ code: 'hangup_uncertain' });
  });

  it('reports a hangup that never got an answer as hangup_uncertain', async () => {
    const viaRest = vi.fn(async (_c: Command) => {
      throw new SdkError('unreachable', 'down', 0);
    });
    const settled = sendCommand({ kind: 'hangup', request_id: 'r-10' }, deps({ viaRest })).catch((e) => e);
    await vi.runAllTimersAsync();
    expect(await settled).toMatchObject({ code: 'hangup_uncertain' });
    expect(viaRest.mock.calls.map(([c]) => c.request_id)).toEqual(Array(COMMAND_ATTEMPTS).fill('r-10'));
  });

  it('reports a hangup as hangup_uncertain when an attempt went unanswered and the retry is refused before it is looked at', async () => {
    for (const refusal of [new SdkError('rate_limited', 'slow down', 429, COMMAND_RETRY_AFTER_MAX_MS / 1000 + 1), new SdkError('unauthorized', 'refused', 401)]) {
      const viaRest = vi.fn(async (_c: Command) => {
        if (viaRest.mock.calls.length === 1) throw new SdkError('unreachable', 'The service did not answer in time.', 0);
        throw refusal;
      });
      const settled = sendCommand({ kind: 'hangup', request_id: `r-${refusal.code}` }, deps({ viaRest })).catch((e) => e);
      await vi.runAllTimersAsync();
      expect(await settled).toMatchObject({ code: 'hangup_uncertain' });
      expect(viaRest).toHaveBeenCalledTimes(2);
    }
  });

  it('asks for a new session once when the token is refused, then resends the same command', async () => {
    let token = 'old';
    const viaRest = vi.fn(async (c: Command) => {
      if (token === 'old') throw new SdkError('unauthorized', 'expired', 401);
      return answer({ ...done, command_id: c.request_id === 'r-11' ? 11 : 0 });
    });
    const rejected = vi.fn(async () => {
      token = 'new';
      return true;
    });
    expect(await sendCommand({ kind: 'hangup', request_id: 'r-11' }, deps({ viaRest, rejected }))).toMatchObject({ command_id: 11 });
    expect(rejected).toHaveBeenCalledTimes(1);
    const refused = vi.fn(async () => false);
    await expect(sendCommand({ kind: 'hangup', request_id: 'r-12' }, deps({ viaRest: async () => Promise.reject(new SdkError('unauthorized', 'x', 401)), rejected: refused }))).rejects.toMatchObject({ code: 'unauthorized' });
  });
});
