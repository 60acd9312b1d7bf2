/**
 * Resolves when `work` settles, or after `ms` of real time, whichever comes first: a stop waits no
 * longer for it (a stop's deadline is the process's, so real time, not the services' clock).
 */
export const atMost = (work: Promise<unknown>, ms: number): Promise<void> =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    work.then(done, done);
  });
