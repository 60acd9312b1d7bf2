/**
 * What a transaction announces after it commits (api/domain/changes.ts): each agent once, at the
 * newest version it was bumped to, however the changes of several transactions were merged. Nodes
 * skip reading a state no newer than one they hold, so an announced version must never be an old one.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { BusMessage } from '../../api/bus/bus.js';
import { createMemoryBus } from '../../api/bus/memory.js';
import { Changes } from '../../api/domain/changes.js';

describe('changes announced on the bus', () => {
  const bus = createMemoryBus();
  afterAll(() => bus.close());

  const announced = (changes: Changes) => {
    const heard: BusMessage[] = [];
    const unsubscribe = bus.subscribe((message) => void heard.push(message));
    changes.publish(bus);
    unsubscribe();
    return heard;
  };

  it('announce each agent once, at the newest version, in whatever order its bumps were recorded or merged', () => {
    const later = new Changes().agentTouched('int_1', 'mem_1', 7).agentTouched('int_1', 'mem_2', 3);
    const earlier = new Changes().agentTouched('int_1', 'mem_1', 5).agentTouched('int_1', 'mem_1', 4);
    const at = expect.any(Number);
    expect(announced(later.merge(earlier))).toEqual([
      { type: 'agent', integrationId: 'int_1', memberId: 'mem_1', version: 7, at },
      { type: 'agent', integrationId: 'int_1', memberId: 'mem_2', version: 3, at },
    ]);
    expect(announced(new Changes().agentTouched('int_1', 'mem_1', 4).merge(new Changes().agentTouched('int_1', 'mem_1', 6)))).toEqual([
      { type: 'agent', integrationId: 'int_1', memberId: 'mem_1', version: 6, at },
    ]);
  });

  it('date their messages from the earliest of the changes merged: the push latency counts from there', async () => {
    const first = new Changes().agentTouched('int_1', 'mem_1', 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = new Changes().agentTouched('int_1', 'mem_2', 1);
    const [a, b] = announced(second.merge(first)) as Array<{ at: number }>;
    const [alone] = announced(new Changes().agentTouched('int_1', 'mem_3', 1)) as Array<{ at: number }>;
    expect(a!.at).toBe(b!.at);
    expect(alone!.at - a!.at).toBeGreaterThanOrEqual(19);
  });
});
