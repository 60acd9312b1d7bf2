/**
 * Claiming dial requests: one claim at a time, a 404 dropped for good, a claim without a clear
 * answer asked again (by itself, and first on every delivery) until the server says.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { LIMITS } from '../../shared/limits.js';
import { ApiError, type Claimed, type DialRequest } from '../../window/src/api.js';
import { CLAIM_RETRY_MS, Dialer, type DialerDeps } from '../../window/src/dialer.js';

afterEach(() => {
  vi.useRealTimers();
});

const NOW = 1_767_261_600_000;
const request = (id: string, expiresInS = 60): DialRequest => ({
  request_id: id,
  display: { name: 'Jo Bloggs', company: null, number: '+442079460123', contact_reference: null, department: null },
  expires_at: NOW / 1000 + expiresInS,
});
const claimed = (id: string) => ({ ok: true, call: { call_id: id, request_id: id }, connect: { params: { To: id, Biz: 'acc_1', CallerId: '+12025550100' } } }) as unknown as Claimed;

function dialer(claim: DialerDeps['claim'], canClaim: DialerDeps['canClaim'] = () => true, serverNow = () => NOW) {
  const deps = { claim: vi.fn(claim), canClaim: vi.fn(canClaim), onClaimed: vi.fn(async () => {}), serverNow, onError: vi.fn() };
  return { dialer: new Dialer(deps), deps };
}

describe('Dialer', () => {
  it('claims a request and hands the claimed call (with its connect params) over', async () => {
    const { dialer: d, deps } = dialer(async (id) => claimed(id));
    await d.offer([request('ci_1')]);
    expect(deps.claim).toHaveBeenCalledWith('ci_1');
    expect(deps.onClaimed).toHaveBeenCalledWith(claimed('ci_1'));
    // Delivered again (push and heartbeat): never claimed twice.
    await d.offer([request('ci_1')]);
    expect(deps.claim).toHaveBeenCalledTimes(1);
  });

  it('drops a request whose claim answers 404 (another claim won, or it expired) and never claims it again', async () => {
    const { dialer: d, deps } = dialer(async (id) => {
      if (id === 'ci_lost') throw new ApiError(404, 'not_found', 'Not found.');
      return claimed(id);
    });
    await d.offer([request('ci_lost'), request('ci_2')]);
    expect(deps.claim.mock.calls.map(([id]) => id)).toEqual(['ci_lost', 'ci_2']);
    expect(deps.onClaimed).toHaveBeenCalledTimes(1);
    expect(deps.onClaimed).toHaveBeenCalledWith(claimed('ci_2'));
    expect(deps.onError).not.toHaveBeenCalled();
    await d.offer([request('ci_lost')]);
    expect(deps.claim).toHaveBeenCalledTimes(2);
  });

  it('retries on a later delivery after a transient failure (network, 429, 5xx)', async () => {
    vi.useFakeTimers();
    let attempts = 0;
    const { dialer: d, deps } = dialer(async (id) => {
      attempts += 1;
      if (attempts === 1) throw new ApiError(0, 'unreachable', 'offline');
      if (attempts === 2) throw new ApiError(429, 'rate_limited', 'slow down');
      return claimed(id);
    });
    await d.offer([request('ci_1')]);
    await d.offer([request('ci_1')]);
    expect(deps.onClaimed).not.toHaveBeenCalled();
    await d.offer([request('ci_1')]);
    expect(deps.onClaimed).toHaveBeenCalledTimes(1);
    expect(deps.onError).toHaveBeenCalledTimes(2);
  });

  it('claims nothing while it cannot take a call, skips expired requests, and runs one claim at a time', async () => {
    let ready = false;
    let finish!: (value: Claimed) => void;
    const { dialer: d, deps } = dialer(() => new Promise<Claimed>((resolve) => (finish = resolve)), () => ready);
    await d.offer([request('ci_1')]);
    expect(deps.claim).not.toHaveBeenCalled();
    ready = true;
    await d.offer([request('ci_old', -1)]);
    expect(deps.claim).not.toHaveBeenCalled();
    const first = d.offer([request('ci_1')]);
    expect(d.claiming).toBe(true);
    await d.offer([request('ci_1'), request('ci_2')]);
    expect(deps.claim).toHaveBeenCalledTimes(1);
    finish(claimed('ci_1'));
    await first;
    expect(d.claiming).toBe(false);
  });

  it('drops a request the server refuses for good (403) and reports it', async () => {
    const { dialer: d, deps } = dialer(async () => {
      throw new ApiError(403, 'outbound_not_allowed', 'no');
    });
    await d.offer([request('ci_1')]);
    await d.offer([request('ci_1')]);
    expect(deps.claim).toHaveBeenCalledTimes(1);
    expect(deps.onError).toHaveBeenCalledTimes(1);
  });

  it('asks a claim without a clear answer again by itself, every few seconds, until it learns it won (the server no longer offers a request it claimed)', async () => {
    vi.useFakeTimers();
    const outcomes: Array<() => Claimed> = [
      () => {
        throw new ApiError(0, 'unreachable', 'The click-to-call service did not answer in time.');
      },
      () => {
        throw new ApiError(503, 'service_unavailable', 'stopping');
      },
      () => claimed('ci_1'),
    ];
    const { dialer: d, deps } = dialer(async () => outcomes.shift()!());
    await d.offer([request('ci_1')]);
    expect(deps.claim).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS - 1);
    expect(deps.claim).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(deps.claim).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS);
    expect(deps.claim.mock.calls.map(([id]) => id)).toEqual(['ci_1', 'ci_1', 'ci_1']);
    expect(deps.onClaimed).toHaveBeenCalledWith(claimed('ci_1'));
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS * 5);
    expect(deps.claim).toHaveBeenCalledTimes(3);
  });

  it('asks an unsure claim first on the next delivery, even when the window now lists that call as its own, and waits as long as a 429 asked', async () => {
    vi.useFakeTimers();
    let attempts = 0;
    const { dialer: d, deps } = dialer(async (id) => {
      attempts += 1;
      if (attempts === 1) throw new ApiError(429, 'rate_limited', 'slow down', 5_000);
      return claimed(id);
    }, (id) => id === 'ci_1');
    await d.offer([request('ci_1')]);
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS);
    expect(deps.claim).toHaveBeenCalledTimes(1);
    // A heartbeat answer delivers another request, and the window holds ci_1 (the server lists it): ci_1 is asked first.
    await d.offer([request('ci_2')]);
    expect(deps.canClaim).toHaveBeenLastCalledWith('ci_1');
    expect(deps.claim.mock.calls.map(([id]) => id)).toEqual(['ci_1', 'ci_1']);
    expect(deps.onClaimed).toHaveBeenCalledWith(claimed('ci_1'));
    await vi.advanceTimersByTimeAsync(5_000);
    expect(deps.claim).toHaveBeenCalledTimes(2);
  });

  it('asks an unsure claim again past its request expiry, up to the connect timeout (it may be claimed), then drops it; a 404 ends it at once', async () => {
    vi.useFakeTimers();
    let now = NOW;
    const { dialer: d, deps } = dialer(
      async () => {
        throw new ApiError(0, 'unreachable', 'offline');
      },
      () => true,
      () => now,
    );
    await d.offer([request('ci_1', 10)]);
    now += 30_000;
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS);
    expect(deps.claim).toHaveBeenCalledTimes(2);
    now = NOW + 10_000 + LIMITS.claimConnectTimeoutSeconds * 1000;
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS * 3);
    expect(deps.claim).toHaveBeenCalledTimes(2);

    deps.claim.mockImplementation(async () => {
      throw new ApiError(404, 'not_found', 'gone');
    });
    now = NOW;
    await d.offer([request('ci_2')]);
    await d.offer([request('ci_2')]);
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS * 3);
    expect(deps.claim.mock.calls.filter(([id]) => id === 'ci_2')).toHaveLength(1);
  });

  it('once stopped, asks no claim again and does not take a claim answered after the stop', async () => {
    vi.useFakeTimers();
    let finish!: (value: Claimed) => void;
    const { dialer: d, deps } = dialer(() => new Promise<Claimed>((resolve) => (finish = resolve)));
    const offered = d.offer([request('ci_1')]);
    d.stop();
    finish(claimed('ci_1'));
    await offered;
    expect(deps.onClaimed).not.toHaveBeenCalled();

    const second = dialer(async () => {
      throw new ApiError(0, 'unreachable', 'offline');
    });
    await second.dialer.offer([request('ci_1')]);
    second.dialer.stop();
    await vi.advanceTimersByTimeAsync(CLAIM_RETRY_MS * 5);
    await second.dialer.offer([request('ci_1')]);
    expect(second.deps.claim).toHaveBeenCalledTimes(1);

    // a claim in flight when the window stops, then failing: nothing is scheduled to ask it again
    let fail!: (error: unknown) => void;
    const third = dialer(() => new Promise<Claimed>((_, reject) => (fail = reject)));
    const pending = third.dialer.offer([request('ci_1')]);
    third.dialer.stop();
    fail(new ApiError(0, 'unreachable', 'offline'));
    await pending;
    expect(vi.getTimerCount()).toBe(0);
  });
});
