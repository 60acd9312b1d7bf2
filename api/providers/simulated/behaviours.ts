/**
 * Magic destination numbers of the simulated provider, for integrators' own CI (documented in
 * docs/simulated-provider.md). Any other number rings after 1 s and answers after 3 s.
 */
export interface Behaviour {
  /** seconds after dialing: the destination rings */
  ringAt: number | null;
  /** seconds after dialing: the destination answers */
  answerAt: number | null;
  /** seconds after dialing: the call ends without an answer, with this status */
  failAt: { at: number; status: 'busy' | 'no-answer' | 'failed' } | null;
  /** seconds after the answer: the far end hangs up */
  farEndHangupAfter: number | null;
  /** REST hangup of this call fails as if the provider were unreachable */
  unreachableOnHangup: boolean;
}

const NORMAL: Behaviour = { ringAt: 1, answerAt: 3, failAt: null, farEndHangupAfter: null, unreachableOnHangup: false };

export const MAGIC_NUMBERS = {
  busy: '+12025550101',
  noAnswer: '+12025550102',
  failed: '+12025550103',
  longRinging: '+12025550104',
  unreachableOnHangup: '+12025550199',
  /** +120255502NN: the far end hangs up NN seconds after answering (01–99) */
  farEndHangupPrefix: '+120255502',
} as const;

export function behaviourFor(number: string): Behaviour {
  switch (number) {
    case MAGIC_NUMBERS.busy:
      return { ...NORMAL, ringAt: null, answerAt: null, failAt: { at: 1, status: 'busy' } };
    case MAGIC_NUMBERS.noAnswer:
      return { ...NORMAL, answerAt: null, failAt: { at: 31, status: 'no-answer' } };
    case MAGIC_NUMBERS.failed:
      return { ...NORMAL, ringAt: null, answerAt: null, failAt: { at: 0, status: 'failed' } };
    case MAGIC_NUMBERS.longRinging:
      return { ...NORMAL, answerAt: 21 };
    case MAGIC_NUMBERS.unreachableOnHangup:
      return { ...NORMAL, unreachableOnHangup: true };
  }
  const farEnd = new RegExp(`^\\${MAGIC_NUMBERS.farEndHangupPrefix}(\\d\\d)$`).exec(number);
  if (farEnd && Number(farEnd[1]) > 0) return { ...NORMAL, farEndHangupAfter: Number(farEnd[1]) };
  return NORMAL;
}

