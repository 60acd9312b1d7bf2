/**
 * How `c2c serve` stops on SIGTERM and SIGINT. The handlers are in place before the node starts: a
 * signal during start-up (a node waiting for its store or its Redis) stops the node as soon as its
 * start settles, instead of killing it half-opened (admin.json left behind, sockets not told to
 * reconnect). A second signal exits at once: the operator insists. A stop that outlasts the
 * deadline exits anyway, and says so.
 *
 * The same signal again within ECHO_MS is the first one's echo, not an insistence: under `npm
 * start` (whose script execs node, so that npm's forwarding reaches it), Ctrl-C reaches node from
 * the terminal and again from npm, and a stop sent to the process group (`kill -- -pgid`, a
 * container's stop) from the group and again from npm.
 */
export const ECHO_MS = 1000;

/**
 * How long a stop may take: above the worst a struggling store makes of its steps, 10 s (serve.ts
 * DRAIN_MS), with room for the closing of connections after them.
 */
export const STOP_DEADLINE_MS = 12_000;

type Signal = 'SIGTERM' | 'SIGINT';

export interface StopSignal {
  /** the first signal's name, once it came */
  received: Promise<Signal>;
  /** The stop itself begins (the node has started): it has the whole deadline from now. */
  closing(): void;
}

/** Waits for the first signal; exits the process on a second one, or at the deadline. */
export function stopSignal(
  log: (message: string) => void,
  exit: (code: number) => void = (code) => process.exit(code),
  signals: { on(signal: Signal, listener: (signal: Signal) => void): unknown } = process,
): StopSignal {
  let deadline: ReturnType<typeof setTimeout> | undefined;
  // Armed at the signal, in case the start never ends; armed again as the stop begins, so that a
  // slow start does not eat the stop's own time.
  const arm = () => {
    clearTimeout(deadline);
    deadline = setTimeout(() => {
      log(`the shutdown did not finish within ${STOP_DEADLINE_MS / 1000} s: exiting`);
      exit(1);
    }, STOP_DEADLINE_MS);
    deadline.unref();
  };
  const received = new Promise<Signal>((resolve) => {
    let first: Signal | undefined;
    let echoing = false;
    const on = (signal: Signal) => {
      if (first && echoing && signal === first) return;
      if (first) {
        log(`${signal} again: exiting without finishing the shutdown`);
        exit(1);
        return;
      }
      first = signal;
      echoing = true;
      setTimeout(() => void (echoing = false), ECHO_MS).unref();
      log(`${signal}: shutting down`);
      arm();
      resolve(signal);
    };
    signals.on('SIGTERM', on);
    signals.on('SIGINT', on);
  });
  return { received, closing: arm };
}
