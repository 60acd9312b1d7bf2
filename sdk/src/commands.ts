/**
 * Widget commands (spec section 4): each carries a client-generated request_id, and a retry after
 * a network failure reuses it, so the server (which never runs one id twice) gives an exactly-once
 * effect. Sent over the socket when it is connected (the ack answers like REST), else POSTed, and
 * POSTed from the first attempt the socket left unanswered on.
 */
import type { Command, CommandResult, ErrorEnvelope } from './contract.js';
import { statusOf } from '../../shared/error-statuses.js';
import { SdkError, isRejection, isTransient, type HttpAnswer } from './http.js';
import { within } from './deadline.js';
import { fullJitter, type Clock } from './timing.js';

export const COMMAND_ATTEMPTS = 4;
/**
 * How long one attempt waits for its answer, the socket's ack or the REST answer alike; then the
 * next attempt goes (over REST, with the same request_id). So a command that nothing answers is
 * reported within its 4 attempts (about 25 s), not left pending.
 */
export const ACK_TIMEOUT_MS = 5000;
/**
 * How long a command waits for a usable widget session: before it is first sent (the session is
 * loading, or being asked again after a rejection) and when its own token is rejected. Then it
 * fails (`unreachable`; `hangup_uncertain` for a hangup) and is dropped: sent after a long outage
 * of the session endpoint, it would act long after the agent clicked (mute a later conversation),
 * when the widget had already undone its effect (after EFFECT_MS). Shorter than EFFECT_MS, so the
 * failure is told before the effect would quietly lapse.
 */
export const SESSION_WAIT_MS = 10_000;
/**
 * The longest Retry-After (or a socket answer's retry_after) a command waits out before it is sent
 * again. A longer one is reported at once: an agent who clicked hang up should hear that it was
 * refused, not wait out a rate-limit window of up to a minute.
 */
export const COMMAND_RETRY_AFTER_MAX_MS = 5000;

export interface CommandDeps {
  clock: Clock;
  /** null when the socket is not connected */
  viaSocket: (command: Command) => Promise<CommandResult | ErrorEnvelope> | null;
  viaRest: (command: Command) => Promise<HttpAnswer<CommandResult>>;
  /** a rejected token: ask the session again; true when a new token is in use */
  rejected: (error: SdkError) => Promise<boolean>;
  random?: () => number;
}

/** A socket's answer that its node failed, not that the service refused: retried over REST. */
const NODE_FAILURES: ReadonlySet<string> = new Set(['service_unavailable', 'internal_error']);

const uncertain = (message = 'The hangup could not be confirmed; the call may still be up.') => new SdkError('hangup_uncertain', message, 502);

/** A command that had no usable session within SESSION_WAIT_MS: it was not sent, and never will be. */
export function noSessionInTime(kind: Command['kind']): SdkError {
  if (kind === 'hangup') return uncertain('The hangup could not be sent in time; the call may still be up.');
  return new SdkError('unreachable', 'The command could not be sent in time: no widget session.');
}

/** Sends a command until it is answered; throws SdkError with the refusal's code otherwise. */
export async function sendCommand(command: Command, d: CommandDeps): Promise<CommandResult> {
  let reasked = false;
  // Once the socket left an attempt unanswered, or its node said it failed, the retries go over
  // REST (the same request_id).
  let socketUnanswered = false;
  // An attempt went unanswered: the service may have carried it out. A hangup given up after that
  // (a retry refused before it was looked at) is uncertain, not refused.
  let mayHaveRun = false;
  const giveUp = (error: SdkError) => (command.kind === 'hangup' && mayHaveRun ? uncertain() : error);
  for (let attempt = 0; ; attempt++) {
    let error: SdkError;
    try {
      const pushed = socketUnanswered ? null : d.viaSocket(command);
      if (pushed) {
        const reply = await pushed.catch((unanswered: unknown) => {
          socketUnanswered = true;
          throw unanswered;
        });
        if (reply && reply.ok) return reply;
        const refusal = (reply ?? {}) as Partial<ErrorEnvelope>;
        const code = refusal.error ?? 'unreachable';
        const retryAfter = typeof refusal.retry_after === 'number' ? refusal.retry_after : undefined;
        // The gateway's node failed (its store out of reach, its own fault): another node may take
        // the command over REST, as the call window's reports do, rather than the same node again.
        if (NODE_FAILURES.has(code)) socketUnanswered = true;
        // With the status REST answers the code with, and the refusal as the body, so both paths
        // classify (and retry) alike and an integrator reads the same error from either.
        throw new SdkError(code, refusal.message ?? code, statusOf(code), retryAfter, reply ?? undefined);
      }
      const answer = await d.viaRest(command);
      if (answer.body && answer.body.ok) return answer.body;
      throw new SdkError('unreachable', 'The service answered without a result.', 0);
    } catch (caught) {
      error = caught instanceof SdkError ? caught : new SdkError('unreachable', String(caught));
    }
    // A hangup is never reported done unless the server says so (spec: hangup_uncertain).
    if (command.kind === 'hangup' && (error.code === 'hangup_uncertain' || error.status === 502)) throw uncertain(error.message);
    if (isRejection(error) && !reasked) {
      reasked = true;
      if (await d.rejected(error)) {
        attempt -= 1;
        continue;
      }
      throw giveUp(error);
    }
    if (isRejection(error)) throw giveUp(error);
    if (!isTransient(error)) throw error;
    if (error.status === 0) mayHaveRun = true;
    const retryAfterMs = (error.retryAfter ?? 0) * 1000;
    // refused before anything was done: nothing is uncertain about it, unless an attempt before went unanswered
    if (retryAfterMs > COMMAND_RETRY_AFTER_MAX_MS) throw giveUp(error);
    if (attempt + 1 >= COMMAND_ATTEMPTS) throw command.kind === 'hangup' ? uncertain() : error;
    // spread out, so that the widgets one limit held back (a call centre behind one address) do not all come back at once
    const wait = retryAfterMs > 0 ? retryAfterMs + Math.floor((d.random ?? Math.random)() * (retryAfterMs / 2)) : 200 + fullJitter(attempt, 400, 4000, d.random);
    await new Promise<void>((resolve) => d.clock.after(wait, resolve));
  }
}

/**
 * Keypad digits and mute toggles reach the service in the order the agent pressed them: sent one
 * at a time, each once the ones before it are answered (or have failed). Sent side by side, a
 * retry or two requests the service handles concurrently would reorder them: an IVR would get
 * 1-3-2, and Mute then Unmute could land reversed and leave the agent muted. Other commands do not
 * wait behind them (a hangup least of all).
 *
 * A command waits at most ORDERED_WAIT_MS behind the others (a network blip holding the one before
 * it through its retries): then it fails `unreachable`, never sent, rather than reach the call long
 * after the agent pressed it (a "#" a minute late, a Mute after its effect lapsed on screen). The
 * ones after it still wait for those before it, so what is sent stays in order.
 */
export const ORDERED_WAIT_MS = SESSION_WAIT_MS;

export class CommandOrder {
  private static readonly ORDERED: ReadonlySet<Command['kind']> = new Set(['dtmf', 'mute', 'unmute']);
  /** settles once every ordered command so far has been answered or has failed */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly clock: Clock,
    /** false once the widget is detached: a command still waiting is not sent */
    private readonly active: () => boolean,
  ) {}

  run<T>(kind: Command['kind'], send: () => Promise<T>): Promise<T> {
    if (!CommandOrder.ORDERED.has(kind)) return send();
    const before = this.tail;
    const late = () => new SdkError('unreachable', 'The command was not sent: the ones pressed before it were not answered in time.');
    const sent = within(this.clock, ORDERED_WAIT_MS, before, late).then(() => {
      if (!this.active()) throw new SdkError('detached', 'The widget is detached.');
      return send();
    });
    this.tail = Promise.allSettled([before, sent]);
    return sent;
  }
}
