/**
 * How `c2c serve` stops on SIGTERM and SIGINT. The handlers are in place before the node starts: a
 * signal during start-up (a node waiting for its store or its Redis) stops the node as soon as its
 * start settles, instead of killing it half-opened (admin.json left behind, sockets not told to
 * reconnect). A second signal exits at once: the operator insists. A stop that outlasts the
 * deadline exits anyway, and says so.
 */

/** How long a stop may take: above the API's drain (serve.ts DRAIN_MS) and the gateway's close. */
export const STOP_DEADLINE_MS = 10_000;

type Signal = 'SIGTERM' | 'SIGINT';

/** Resolves with the first signal's name; exits the process on a second one or at the deadline. */
export function stopSignal(log: (message: string) => void, exit: (code: number) => void = (code) => process.exit(code)): Promise<Signal> {
  return new Promise((resolve) => {
    let received: Signal | undefined;
    const on = (signal: Signal) => {
      if (received) {
        log(`${signal} again: exiting without finishing the shutdown`);
        exit(1);
        return;
      }
      received = signal;
      log(`${signal}: shutting down`);
      const deadline = setTimeout(() => {
        log(`the shutdown did not finish within ${STOP_DEADLINE_MS / 1000} s: exiting`);
        exit(1);
      }, STOP_DEADLINE_MS);
      deadline.unref();
      resolve(signal);
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
  });
}
