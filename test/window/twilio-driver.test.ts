/** The Twilio voice driver's wiring, against a fake Device and fake Calls (Twilio itself is unreachable here). */
import { describe, expect, it, vi } from 'vitest';
import { CONNECT_WAIT_MS, RING_WAIT_MS, TwilioDriver, type TwilioCallLike, type TwilioDeviceLike, type TwilioDeviceOptions } from '../../window/src/drivers/twilio.js';
import type { DriverEvent } from '../../window/src/drivers/types.js';

type Listener = (...args: any[]) => void;

class FakeEmitter {
  readonly listeners = new Map<string, Listener[]>();
  on(event: string, listener: Listener) {
    this.listeners.set(event, [...(this.listeners.get(event) ?? []), listener]);
    return this;
  }
  emit(event: string, ...args: unknown[]) {
    for (const listener of this.listeners.get(event) ?? []) listener(...args);
  }
}

class FakeCall extends FakeEmitter implements TwilioCallLike {
  muted = false;
  accept = vi.fn(() => this.emit('accept', this));
  reject = vi.fn(() => this.emit('reject'));
  disconnect = vi.fn(() => this.emit('disconnect', this));
  mute = vi.fn((muted = true) => {
    this.muted = muted;
    this.emit('mute', muted, this);
  });
  isMuted = () => this.muted;
  sendDigits = vi.fn();
  constructor(readonly customParameters = new Map<string, string>()) {
    super();
  }
}

class FakeDevice extends FakeEmitter implements TwilioDeviceLike {
  readonly placed: FakeCall[] = [];
  // as @twilio/voice-sdk's Device: each says so by its event once the signalling server answered
  register = vi.fn(async () => {
    await Promise.resolve();
    this.emit('registered');
  });
  unregister = vi.fn(async () => {
    await Promise.resolve();
    this.emit('unregistered');
  });
  updateToken = vi.fn();
  destroy = vi.fn();
  connect = vi.fn(async (_options: { params: Record<string, string> }) => {
    const call = new FakeCall();
    this.placed.push(call);
    return call;
  });
  constructor(
    readonly token: string,
    readonly options: TwilioDeviceOptions,
  ) {
    super();
  }
}

function driver(register = true, registerFails = false) {
  const devices: FakeDevice[] = [];
  const createDevice = vi.fn((token: string, options: TwilioDeviceOptions) => {
    const device = new FakeDevice(token, options);
    if (registerFails) device.register.mockRejectedValueOnce(new Error('registration refused'));
    devices.push(device);
    return device;
  });
  const logged: unknown[] = [];
  const twilio = new TwilioDriver({ createDevice, register, logError: (error) => logged.push(error) });
  const events: DriverEvent[] = [];
  twilio.on((event) => events.push(event));
  return { twilio, devices, createDevice, events, logged, device: () => devices[0]! };
}

const PARAMS = { To: 'ci_1', Biz: 'acc_1', CallerId: '+12025550100' };

describe('TwilioDriver', () => {
  it('creates one Device with the voice token (no close protection: the window warns itself) and registers it for incoming calls', async () => {
    const { twilio, createDevice, device } = driver();
    expect(twilio.ready).toBe(false);
    await twilio.start('jwt-1');
    expect(twilio.ready).toBe(true);
    expect(createDevice).toHaveBeenCalledTimes(1);
    expect(device().token).toBe('jwt-1');
    expect(device().options).toMatchObject({ closeProtection: false });
    expect(device().register).toHaveBeenCalledTimes(1);
    await twilio.start('jwt-2');
    expect(createDevice).toHaveBeenCalledTimes(1);
    expect(device().updateToken).toHaveBeenCalledWith('jwt-2');
  });

  it('does not register when incoming calls are not allowed; a failed registration is reported but outgoing calls still work', async () => {
    const quiet = driver(false);
    await quiet.twilio.start('jwt');
    expect(quiet.device().register).not.toHaveBeenCalled();
    const failing = driver(true, true);
    await failing.twilio.start('jwt');
    expect(failing.device().register).toHaveBeenCalledTimes(1);
    expect(failing.events).toContainEqual({ type: 'error', code: null, lasting: true }); // the fake's rejection has no Twilio code
    expect(failing.logged).toEqual([new Error('registration refused')]);
    expect(failing.events).not.toContainEqual({ type: 'registered' });
    expect(failing.twilio.ready).toBe(true);
    await failing.twilio.connect(PARAMS);
    expect(failing.device().connect).toHaveBeenCalledTimes(1);
  });

  it('registers again with the next voice token after a failed registration, and says when it is registered', async () => {
    const { twilio, device, events } = driver(true, true);
    await twilio.start('jwt-1');
    expect(events.at(-1)).toMatchObject({ type: 'error', lasting: true });
    twilio.updateToken('jwt-2');
    await vi.waitFor(() => expect(events.at(-1)).toEqual({ type: 'registered' }));
    expect(device().register).toHaveBeenCalledTimes(2);
    // registered: later tokens only update the Device
    twilio.updateToken('jwt-3');
    expect(device().register).toHaveBeenCalledTimes(2);
  });

  it('reports whether it is registered now: not before start, not after a failed registration, nor once the Device lost it (said at once); again once it is back', async () => {
    const { twilio, device, events } = driver(true, true);
    expect(twilio.registered).toBe(false);
    await twilio.start('jwt-1');
    expect(twilio.registered).toBe(false);
    twilio.updateToken('jwt-2');
    await vi.waitFor(() => expect(twilio.registered).toBe(true));
    const told = events.length;
    device().emit('unregistered');
    expect(twilio.registered).toBe(false);
    device().emit('unregistered'); // said once per loss
    expect(events.slice(told)).toEqual([{ type: 'unregistered' }]);
    device().emit('registered');
    expect(twilio.registered).toBe(true);
    expect(events.slice(told)).toEqual([{ type: 'unregistered' }, { type: 'registered' }]);
    const quiet = driver(false);
    await quiet.twilio.start('jwt');
    expect(quiet.twilio.registered).toBe(false);
  });

  it('registers when incoming calls are turned on after it started, and lets the registration go when they are turned off', async () => {
    const { twilio, device, events } = driver(false);
    await twilio.start('jwt');
    expect(device().register).not.toHaveBeenCalled();
    twilio.setRegistration(true);
    twilio.setRegistration(true);
    await vi.waitFor(() => expect(twilio.registered).toBe(true));
    expect(device().register).toHaveBeenCalledTimes(1);
    twilio.setRegistration(false);
    await vi.waitFor(() => expect(twilio.registered).toBe(false));
    expect(device().unregister).toHaveBeenCalledTimes(1);
    // the registration it let go itself is no loss to report
    expect(events.map((e) => e.type)).not.toContain('unregistered');
    // a Device that registers again by itself (its signalling back) while not wanted is not counted
    device().emit('registered');
    expect(twilio.registered).toBe(false);
  });

  it('turned off and on again while its unregister is on its way: one register after it, never two at once, and it ends registered', async () => {
    const { twilio, device } = driver(true);
    await twilio.start('jwt');
    let finishUnregister!: () => void;
    device().unregister.mockImplementationOnce(() => new Promise<void>((resolve) => (finishUnregister = resolve)));
    let inFlight = 0;
    let most = 0;
    device().register.mockImplementation(async () => {
      most = Math.max(most, ++inFlight);
      await Promise.resolve();
      inFlight--;
    });
    twilio.setRegistration(false);
    twilio.setRegistration(true);
    twilio.setRegistration(false);
    twilio.setRegistration(true);
    finishUnregister();
    // the start's registration, and one after the unregister
    await vi.waitFor(() => expect(device().register).toHaveBeenCalledTimes(2));
    await vi.waitFor(() => expect(twilio.registered).toBe(true));
    expect(device().unregister).toHaveBeenCalledTimes(1);
    expect(most).toBe(1);
  });

  it('a failed registration no longer wanted stops being said', async () => {
    const { twilio, events } = driver(true, true);
    await twilio.start('jwt');
    expect(events.at(-1)).toMatchObject({ type: 'error', lasting: true });
    twilio.setRegistration(false);
    expect(events.at(-1)).toEqual({ type: 'registered' });
    expect(twilio.registered).toBe(false);
  });

  it('passes fresh tokens to Device.updateToken and forwards tokenWillExpire', async () => {
    const { twilio, device, events } = driver();
    await twilio.start('jwt-1');
    device().emit('tokenWillExpire', device());
    expect(events).toContainEqual({ type: 'token-expiring' });
    twilio.updateToken('jwt-2');
    expect(device().updateToken).toHaveBeenCalledWith('jwt-2');
  });

  it('connects with the claim params and drives mute, digits and disconnect on the placed call', async () => {
    const { twilio, device, events } = driver();
    await expect(twilio.connect(PARAMS)).rejects.toThrow(/not ready/);
    await twilio.start('jwt');
    await twilio.connect(PARAMS);
    expect(device().connect).toHaveBeenCalledWith({ params: PARAMS });
    const call = device().placed[0]!;
    call.emit('ringing', false);
    call.emit('accept', call);
    expect(events.map((e) => e.type)).toEqual(['ringing', 'accepted']);
    await expect(twilio.connect(PARAMS)).rejects.toThrow(/already on a call/);
    twilio.mute(true);
    expect(call.mute).toHaveBeenCalledWith(true);
    expect(events).toContainEqual({ type: 'muted', muted: true });
    twilio.sendDigits('12#');
    expect(call.sendDigits).toHaveBeenCalledWith('12#');
    expect(() => twilio.sendDigits('12; drop')).toThrow(/DTMF/);
    const told = events.length;
    twilio.disconnect();
    expect(call.disconnect).toHaveBeenCalledTimes(1);
    // a leg the window let go itself is not reported: its late end must not end the window's next call
    expect(events.slice(told)).toEqual([]);
    expect(() => twilio.mute(false)).toThrow(/no call/);
    expect(() => twilio.sendDigits('1')).toThrow(/no call/);
  });

  it('reports the end of a call the far end hung up, and not the late end of one it let go while on the next', async () => {
    const { twilio, device, events } = driver();
    await twilio.start('jwt');
    await twilio.connect(PARAMS);
    const first = device().placed[0]!;
    first.emit('accept', first);
    first.emit('disconnect', first); // the far end hung up
    expect(events.at(-1)).toEqual({ type: 'disconnected' });
    await twilio.connect(PARAMS);
    const second = device().placed[1]!;
    second.emit('accept', second);
    const told = events.length;
    first.emit('disconnect', first); // a stray late event of the first leg
    expect(events.slice(told)).toEqual([]);
    twilio.mute(true); // the second call is still the driver's
    expect(second.mute).toHaveBeenCalledWith(true);
  });

  it('takes an incoming call from the Device and accepts it', async () => {
    const { twilio, device, events } = driver();
    await twilio.start('jwt');
    const incoming = new FakeCall(new Map([['intent', 'ci_in']]));
    device().emit('incoming', incoming);
    expect(events).toContainEqual({ type: 'incoming', ref: 'ci_in' });
    await twilio.accept(null);
    expect(incoming.accept).toHaveBeenCalledTimes(1);
    expect(events.at(-1)).toEqual({ type: 'accepted' });
    twilio.mute(true);
    expect(incoming.mute).toHaveBeenCalledWith(true);
    // A second ring while on a call is a stray leg: rejected at once.
    const stray = new FakeCall();
    device().emit('incoming', stray);
    expect(stray.reject).toHaveBeenCalledTimes(1);
  });

  it("gives up placing a call Twilio's signalling never answers (a firewall blocking it), so the window is free to take the next; a leg that comes up after is let go", async () => {
    vi.useFakeTimers();
    try {
      const { twilio, device } = driver();
      await twilio.start('jwt');
      let connected!: (call: FakeCall) => void;
      device().connect.mockImplementationOnce(() => new Promise((resolve) => (connected = resolve)));
      const placing = twilio.connect(PARAMS).then(() => 'placed', (error: { refusal?: string }) => error.refusal);
      await vi.advanceTimersByTimeAsync(CONNECT_WAIT_MS - 1);
      let outcome: string | undefined;
      void placing.then((value) => (outcome = value));
      await vi.advanceTimersByTimeAsync(0);
      expect(outcome).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      expect(await placing).toBe('unreachable');
      // Twilio comes back: the leg of the call given up is hung up at once, and the next call is placed
      const late = new FakeCall();
      connected(late);
      await vi.advanceTimersByTimeAsync(0);
      expect(late.disconnect).toHaveBeenCalledTimes(1);
      await twilio.connect(PARAMS);
      expect(device().placed).toHaveLength(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('answers a call that rings within RING_WAIT_MS of the answer (the widget showed it before Twilio rang the Device); with none by then, or while on a call, refuses', async () => {
    vi.useFakeTimers();
    try {
      const { twilio, device } = driver();
      await twilio.start('jwt');
      let answered = false;
      const answering = twilio.accept(null).then(() => (answered = true));
      await vi.advanceTimersByTimeAsync(RING_WAIT_MS - 1000);
      expect(answered).toBe(false);
      const ringing = new FakeCall(new Map([['intent', 'ci_in']]));
      device().emit('incoming', ringing);
      await answering;
      expect(ringing.accept).toHaveBeenCalledTimes(1);

      ringing.emit('disconnect', ringing);
      const refused = expect(twilio.accept(null)).rejects.toThrow(/No incoming call/);
      await vi.advanceTimersByTimeAsync(RING_WAIT_MS);
      await refused;
      // on a call, no ring is waited for: refused at once, saying why in a way the window can word
      await twilio.connect(PARAMS);
      await expect(twilio.accept(null)).rejects.toMatchObject({ refusal: 'nothing_ringing', message: expect.stringMatching(/No incoming call/) });
      await expect(twilio.connect(PARAMS)).rejects.toMatchObject({ refusal: 'on_call' });
    } finally {
      vi.useRealTimers();
    }
  });

  it('does not let a late answer pick up the next caller: a ring naming another call is refused, one naming the call or none is taken', async () => {
    vi.useFakeTimers();
    try {
      const { twilio, device } = driver();
      await twilio.start('jwt');
      // The answer for ci_gone waits for its ring; the caller gave up and ci_next rings instead.
      const refused = expect(twilio.accept('ci_gone')).rejects.toMatchObject({ refusal: 'other_ringing', message: expect.stringMatching(/Another call/) });
      const next = new FakeCall(new Map([['intent', 'ci_next']]));
      device().emit('incoming', next);
      await refused;
      expect(next.accept).not.toHaveBeenCalled();
      // still ringing: the answer meant for it takes it
      await twilio.accept('ci_next');
      expect(next.accept).toHaveBeenCalledTimes(1);
      next.emit('disconnect', next);
      // a ring that names no call (an older TwiML) is taken by any answer
      const plain = new FakeCall();
      device().emit('incoming', plain);
      await twilio.accept('ci_any');
      expect(plain.accept).toHaveBeenCalledTimes(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it('rejects a ringing call, and reports a call the caller canceled as disconnected', async () => {
    const { twilio, device, events } = driver();
    await twilio.start('jwt');
    const first = new FakeCall();
    device().emit('incoming', first);
    expect(events.at(-1)).toEqual({ type: 'incoming', ref: null });
    twilio.reject();
    expect(first.reject).toHaveBeenCalledTimes(1);
    const second = new FakeCall();
    device().emit('incoming', second);
    second.emit('cancel');
    expect(events.at(-1)).toEqual({ type: 'disconnected' });
    vi.useFakeTimers();
    try {
      const refused = expect(twilio.accept(null)).rejects.toThrow(/No incoming call/); // the canceled call is not answered
      await vi.advanceTimersByTimeAsync(RING_WAIT_MS);
      await refused;
    } finally {
      vi.useRealTimers();
    }
  });

  it("reports a placed call that could not open the microphone as ended and the microphone failed, not as the SDK's text; other call errors as they are", async () => {
    const { twilio, device, events } = driver();
    await twilio.start('jwt');
    for (const [code, name] of [
      [31401, 'PermissionDeniedError'],
      [31402, 'AcquisitionFailedError'],
      [31208, 'UserMedia (1.x)'],
      [31201, 'UserMedia (1.x)'],
    ] as const) {
      await twilio.connect(PARAMS);
      const call = device().placed.at(-1)!;
      const told = events.length;
      // @twilio/voice-sdk's Call after connect() resolved: its getUserMedia fails, it disconnects, then errs
      call.emit('disconnect', call);
      call.emit('error', { code, message: `${name} (${code})` });
      expect(events.slice(told)).toEqual([{ type: 'disconnected' }, { type: 'mic-failed' }]);
    }
    await twilio.connect(PARAMS);
    const call = device().placed.at(-1)!;
    call.emit('error', { code: 31005, message: 'ConnectionError (31005)' });
    expect(events.at(-1)).toEqual({ type: 'error', code: 31005 });
    // A leg the driver let go says nothing of the next call's microphone.
    twilio.disconnect();
    const next = new FakeCall(new Map([['intent', 'ci_next']]));
    device().emit('incoming', next);
    const told = events.length;
    call.emit('error', { code: 31402, message: 'AcquisitionFailedError (31402)' });
    expect(events.slice(told)).toEqual([]);
  });

  it('forwards device and call errors, and destroys the Device', async () => {
    const { twilio, device, events, logged } = driver();
    await twilio.start('jwt');
    const error = { code: 20104, message: 'AccessTokenExpired (20104): The Access Token provided to the Twilio API has expired' };
    device().emit('error', error);
    expect(events).toContainEqual({ type: 'error', code: 20104 }); // the window words the code
    expect(logged).toEqual([error]); // the whole error goes to the console, for support
    twilio.destroy();
    expect(device().destroy).toHaveBeenCalledTimes(1);
    expect(twilio.ready).toBe(false);
  });
});
