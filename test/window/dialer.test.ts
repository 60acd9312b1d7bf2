/** Claiming dial requests: one claim at a time, a 404 dropped for good, transient failures retried on the next delivery. */
import { describe, expect, it, vi } from 'vitest';
import { ApiError, type Claimed, type DialRequest } from '../../window/src/api.js';
import { Dialer, type DialerDeps } from '../../window/src/dialer.js';

const NOW = 1_767_261_600_000;
const request = (id: string, expiresInS = 60): DialRequest => ({
  request_id: id,
  display: { name: 'Jo Bloggs', company: null, number: '+442079460123', contact_reference: null, department: null },
  expires_at: NOW / 1000 + expiresInS,
});
const claimed = (id: string) => ({ ok: true, call: { call_id: id, request_id: id }, connect: { params: { To: id, Biz: 'acc_1', CallerId: '+12025550100' } } }) as unknown as Claimed;

function dialer(claim: DialerDeps['claim'], canClaim = () => true) {
  const deps = { claim: vi.fn(claim), canClaim: vi.fn(canClaim), onClaimed: vi.fn(async () => {}), serverNow: () => NOW, onError: vi.fn() };
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
});
