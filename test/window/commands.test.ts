/** The call window's command runner: each command once, an ack for every delivery, results kept until the server has them. */
import { describe, expect, it, vi } from 'vitest';
import type { EngineCommand } from '../../shared/schemas/engine-api.js';
import { CommandRunner } from '../../window/src/commands.js';

const command = (command_id: number, kind: EngineCommand['kind'] = 'mute', digits: string | null = null): EngineCommand => ({
  command_id,
  kind,
  call_id: 'ci_1',
  digits,
  available: null,
  ref: null,
});

describe('CommandRunner', () => {
  it('carries out each command_id once however often it is delivered, and acks every delivery', async () => {
    const execute = vi.fn();
    const runner = new CommandRunner(execute);
    const first = await runner.deliver([command(1), command(2, 'dtmf', '12')]);
    const again = await runner.deliver([command(1), command(2, 'dtmf', '12'), command(3, 'unmute')]);
    const third = await runner.deliver([command(3, 'unmute')]);
    expect(execute.mock.calls.map(([c]) => c.command_id)).toEqual([1, 2, 3]);
    expect(first).toEqual({ acks: [{ command_id: 1, result: 'done' }, { command_id: 2, result: 'done' }], fresh: 2 });
    expect(again.acks.map((a) => a.command_id)).toEqual([1, 2, 3]);
    expect(again.fresh).toBe(1);
    expect(third).toEqual({ acks: [{ command_id: 3, result: 'done' }], fresh: 0 });
  });

  it('a delivery that arrives while the command still runs waits for it instead of running it again', async () => {
    let finish!: () => void;
    const execute = vi.fn(() => new Promise<void>((resolve) => (finish = resolve)));
    const runner = new CommandRunner(execute);
    const pushed = runner.deliver([command(7, 'answer')]);
    const polled = runner.deliver([command(7, 'answer')]);
    finish();
    const [a, b] = await Promise.all([pushed, polled]);
    expect(execute).toHaveBeenCalledTimes(1);
    expect(a.acks).toEqual([{ command_id: 7, result: 'done' }]);
    expect(b.acks).toEqual([{ command_id: 7, result: 'done' }]);
    expect(a.fresh + b.fresh).toBe(1);
  });

  it('acks a failure as failed with the error text (at most 200 characters), and repeats that result', async () => {
    const runner = new CommandRunner(() => {
      throw new Error('No incoming call is ringing in this window.');
    });
    const long = new CommandRunner(() => {
      throw new Error('x'.repeat(500));
    });
    expect((await runner.deliver([command(4, 'answer')])).acks).toEqual([{ command_id: 4, result: 'failed', error: 'No incoming call is ringing in this window.' }]);
    expect((await runner.deliver([command(4, 'answer')])).acks[0]!.result).toBe('failed');
    expect((await long.deliver([command(5)])).acks[0]!.error).toHaveLength(200);
  });

  it('keeps results for the next heartbeat until the server confirms them', async () => {
    const runner = new CommandRunner(() => {});
    await runner.deliver([command(1), command(2)]);
    expect(runner.pendingAcks().map((a) => a.command_id)).toEqual([1, 2]);
    runner.confirm([{ command_id: 1, result: 'done' }]);
    expect(runner.pendingAcks().map((a) => a.command_id)).toEqual([2]);
    runner.confirm(runner.pendingAcks());
    expect(runner.pendingAcks()).toEqual([]);
    // Delivered again after the confirmation: the server lacks the ack after all, so it is carried again.
    await runner.deliver([command(2)]);
    expect(runner.pendingAcks()).toEqual([{ command_id: 2, result: 'done' }]);
  });

  it('carries at most 100 acks in one heartbeat', async () => {
    const runner = new CommandRunner(() => {});
    await runner.deliver(Array.from({ length: 130 }, (_, i) => command(i + 1)));
    expect(runner.pendingAcks()).toHaveLength(100);
    runner.confirm(runner.pendingAcks());
    expect(runner.pendingAcks()).toHaveLength(30);
  });
});
