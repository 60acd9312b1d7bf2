/** The system clock's timers (api/clock.ts): work that fails is reported, never left to stop the process. */
import { describe, expect, it } from 'vitest';
import { systemClock } from '../../api/clock.js';

describe('the system clock', () => {
  it("reports a timer's failed work as a process warning, not an unhandled rejection", async () => {
    const unhandled: unknown[] = [];
    const warnings: string[] = [];
    const noteRejection = (reason: unknown) => unhandled.push(reason);
    const noteWarning = (warning: Error) => warning.message.startsWith("A timer's work failed") && warnings.push(warning.message);
    process.on('unhandledRejection', noteRejection);
    process.on('warning', noteWarning);
    try {
      systemClock.after(0, async () => {
        throw new Error('the app is closing');
      });
      systemClock.after(0, () => {
        throw new Error('a synchronous failure');
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      process.off('unhandledRejection', noteRejection);
      process.off('warning', noteWarning);
    }
    expect(unhandled).toEqual([]);
    expect(warnings).toEqual([expect.stringContaining('the app is closing'), expect.stringContaining('a synchronous failure')]);
  });

  it('still runs the work of a timer that is not cancelled, and not that of one that is', async () => {
    const ran: string[] = [];
    systemClock.after(0, () => void ran.push('kept'));
    systemClock.after(0, () => void ran.push('cancelled')).cancel();
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(ran).toEqual(['kept']);
  });
});
