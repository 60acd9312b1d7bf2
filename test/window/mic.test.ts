/**
 * The call window's microphone checks (window/src/mic.ts): what each getUserMedia failure means to
 * the agent, and microphones plugged in or out.
 */
import { describe, expect, it, vi } from 'vitest';
import { askMicrophone, watchMicDevices } from '../../window/src/mic.js';

const failingWith = (name: string) => ({ getUserMedia: vi.fn(async () => Promise.reject(Object.assign(new Error(name), { name }))) });

describe('askMicrophone', () => {
  it('releases the stream it was given at once (the voice SDK opens its own on a call)', async () => {
    const stop = vi.fn();
    const media = { getUserMedia: vi.fn(async () => ({ getTracks: () => [{ stop }, { stop }] }) as unknown as MediaStream) };
    expect(await askMicrophone(media)).toBe('ready');
    expect(media.getUserMedia).toHaveBeenCalledWith({ audio: true });
    expect(stop).toHaveBeenCalledTimes(2);
  });

  it('tells blocked from missing from in use by another application, and a browser without one', async () => {
    expect(await askMicrophone(failingWith('NotAllowedError'))).toBe('denied');
    expect(await askMicrophone(failingWith('NotFoundError'))).toBe('missing');
    expect(await askMicrophone(failingWith('NotReadableError'))).toBe('busy');
    expect(await askMicrophone(undefined)).toBe('unsupported');
  });
});

describe('watchMicDevices', () => {
  const devices = (...kinds: MediaDeviceKind[]) => kinds.map((kind) => ({ kind }) as MediaDeviceInfo);

  it('says, at each change of devices, whether a microphone is left', async () => {
    const target = new EventTarget();
    const enumerateDevices = vi.fn(async () => devices('audiooutput', 'videoinput'));
    const media = Object.assign(target, { enumerateDevices });
    const seen: boolean[] = [];
    watchMicDevices(media, (present) => seen.push(present));
    target.dispatchEvent(new Event('devicechange'));
    await vi.waitFor(() => expect(seen).toEqual([false]));
    enumerateDevices.mockResolvedValue(devices('audioinput', 'audiooutput'));
    target.dispatchEvent(new Event('devicechange'));
    await vi.waitFor(() => expect(seen).toEqual([false, true]));
    // a browser that will not list them says nothing
    enumerateDevices.mockRejectedValue(new Error('not allowed'));
    target.dispatchEvent(new Event('devicechange'));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen).toEqual([false, true]);
  });

  it('watches nothing where the browser has no media devices', () => {
    expect(() => watchMicDevices(undefined, () => undefined)).not.toThrow();
  });
});
