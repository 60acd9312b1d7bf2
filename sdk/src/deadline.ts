/**
 * A time limit on something the SDK waits for (a request, a session), on the SDK's own clock so
 * tests move it. Whatever is waited for is left to settle unheard once the limit has passed: the
 * caller has moved on (reported the failure, retried), and must not act on a late answer.
 */
import type { Clock } from './timing.js';

/** Settles as `promise` does, or rejects with `late()` once `ms` pass first. */
export function within<T>(clock: Clock, ms: number, promise: Promise<T>, late: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = clock.after(ms, () => reject(late()));
    promise.then(
      (value) => {
        clock.cancel(timer);
        resolve(value);
      },
      (error: unknown) => {
        clock.cancel(timer);
        reject(error);
      },
    );
  });
}
