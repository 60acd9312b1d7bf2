/**
 * Ending a call that moved on while it was being ended, and calls whose provider final callback
 * never came (spec sections 3 and 8):
 * - a hangup or a reaper rule that decided on a call with no provider leg ends it only if it still
 *   has none: a call the voice webhook dialed meanwhile is ended through the provider, or left to
 *   its own rules, never recorded ended with its leg still up;
 * - the reaper ends, through the provider, an inbound call still ringing past its ring window, an
 *   outbound call ringing past the ring timeout, and an answered call past its time limit, each
 *   30 s (PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) after the provider should have reported it; the
 *   bill never covers more than the time limit.
 *
 * A call answered while it is being ended ends `completed` and billed, whatever the ender decided
 * from its earlier read; a reaper rule finding it answered leaves it be.
 *
 * Where the provider's own record of the call can be read, it settles a call whose final callback
 * was lost: once its window lets go of it, and when it is overdue (calls/provider-records.ts).
 * The other tests here have nothing tell the service how the call went: the simulator forgets its
 * call records for them.
 *
 * Races are staged with a Db that runs the competing step right after the statement that made the
 * decision; lost callbacks with a simulator whose status callbacks go nowhere. The reaper does not
 * run by itself here: tests move the clock and then call tick().
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { hangupCall } from '../../api/domain/calls/hangup.js';
import { createMember } from '../../api/domain/operator/accounts.js';
import {
  createReaper,
  PROVIDER_FINAL_CALLBACK_GRACE_SECONDS,
  PROVIDER_RECHECK_SECONDS,
  PROVIDER_RECORD_PATIENCE_SECONDS,
  PROVIDER_REQUESTS_AT_ONCE,
  RING_TIMEOUT_SECONDS,
} from '../../api/domain/reaper.js';
import { MAGIC_NUMBERS } from '../../api/providers/simulated/behaviours.js';
import { ProviderUnreachable } from '../../api/providers/index.js';
import { loadProviderAccount } from '../../api/providers/index.js';
import { PROVIDER_PATHS } from '../../api/providers/twiml.js';
import type { Db } from '../../api/store/index.js';
import { engineIdentity } from '../../shared/prefixes.js';
import { storeDrivers } from '../helpers/env.js';
import { command, heartbeat, openSession, launchTicket, readyAgent, requestCall, type Agent } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { providerWebhooks } from '../helpers/provider.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';
import { callDurationSeconds, type CallRow } from '../../api/domain/views.js';

describe.each(storeDrivers())('calls that moved on, and lost final callbacks, on %s', (driver) => {
  let h: Harness;
  let t: Tenant;
  let api: Client;
  const simulator = () => h.services.providers.simulator;
  const row = async (id: string) => (await h.services.db.query<CallRow>('SELECT * FROM call_intents WHERE id = $1', [id]))[0]!;
  const tick = () => h.services.reaper.tick();
  const { signedStatus } = providerWebhooks(() => h, () => api);

  /** The simulator's webhooks reach the app, except status callbacks when `loseStatus` is set. */
  function deliverWebhooks(loseStatus: boolean) {
    simulator().attach(async (path, params, signature) => {
      if (loseStatus && path.startsWith(PROVIDER_PATHS.status)) return { status: 200, body: '' };
      const response = await h.app.inject({
        method: 'POST',
        url: path,
        payload: new URLSearchParams(params).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
      });
      return { status: response.statusCode, body: response.body };
    });
  }

  /** A Db whose first statement matching `decided` (and returning rows) is followed by `meanwhile`. */
  function racing(decided: (text: string) => boolean, meanwhile: () => Promise<void>): Db {
    const db = h.services.db;
    let fired = false;
    return {
      ...db,
      driver: db.driver,
      query: async (text, params) => {
        const rows = await db.query(text, params);
        if (!fired && decided(text) && rows.length > 0) {
          fired = true;
          await meanwhile();
        }
        return rows;
      },
      tx: (fn, options) => db.tx(fn, options),
      exec: (script) => db.exec(script),
      unavailableCount: () => db.unavailableCount(),
      close: () => db.close(),
    } as Db;
  }

  /** A real (not simulated) window: its claim leaves the intent `claimed` until the browser connects. */
  async function claimedByRealWindow() {
    const widgetToken = await openSession(api, t);
    const paired = await api.post('/engine/pair', { ticket: await launchTicket(api, widgetToken), simulated: false });
    expect(paired.status, JSON.stringify(paired.body)).toBe(201);
    const engineToken: string = paired.body.engine_token;
    await api.post('/engine/voice-token', undefined, { auth: engineToken });
    await heartbeat(api, engineToken);
    const requested = await requestCall(api, t);
    expect(requested.status, JSON.stringify(requested.body)).toBe(202);
    const id: string = requested.body.request_id;
    const claimed = await api.post('/engine/claim', { request_id: id }, { auth: engineToken });
    expect(claimed.body.call.status).toBe('claimed');
    const account = (await loadProviderAccount(h.services.db, t.accountId))!;
    /** what the browser's Device.connect does: the provider posts the voice webhook and dials */
    const connect = async () => {
      await simulator().connect(account, engineIdentity(paired.body.engine.id), claimed.body.connect.params);
    };
    return { id, engineToken, connect };
  }

  beforeAll(async () => {
    h = await createHarness(driver);
    api = client(h.app);
  });
  afterAll(() => h.close());

  beforeEach(async () => {
    t = await seedTenant(h.services);
    simulator().faults.records = 'forgotten';
  });

  // Callbacks flow again, and whatever a test left on the line is hung up through the provider.
  afterEach(async () => {
    deliverWebhooks(false);
    simulator().faults.records = 'kept';
    const live = await h.services.db.query<{ id: string; integration_id: string }>(
      `SELECT id, integration_id FROM call_intents WHERE provider_call_sid IS NOT NULL AND ended_at IS NULL`,
    );
    for (const call of live) await h.services.calls.hangupByServer(call.integration_id, call.id);
  });

  it('a hangup of a claimed call that the voice webhook dials meanwhile ends the dialed leg through the provider', async () => {
    const { id, connect } = await claimedByRealWindow();
    const db = racing((text) => text.startsWith('SELECT * FROM call_intents WHERE id'), connect);
    const ended = await hangupCall({ db, clock: h.clock, providers: h.services.providers }, id, 'hangup');
    expect(simulator().liveLegs()).toBe(0);
    expect(ended.call.status).toBe('canceled');
    const call = await row(id);
    expect(call.provider_call_sid).not.toBeNull();
    expect(call.hangup_requested_at).not.toBeNull();
    await h.clock.advanceSeconds(10); // the simulator would have answered at 3 s
    expect(await row(id)).toMatchObject({ status: 'canceled', answered_at: null });
    expect(simulator().liveLegs()).toBe(0);
  });

  it('the connect timeout spares a claimed call whose browser connect lands as it fires', async () => {
    const { id, engineToken, connect } = await claimedByRealWindow();
    await h.clock.advanceSeconds(30);
    await heartbeat(api, engineToken, { call_id: id });
    await h.clock.advanceSeconds(30);
    await heartbeat(api, engineToken, { call_id: id });
    const db = racing((text) => text.includes("status = 'claimed' AND provider_call_sid IS NULL"), connect);
    await createReaper({ db, bus: h.services.bus, clock: h.clock, providers: h.services.providers }).tick();
    expect(await row(id)).toMatchObject({ status: 'dialing', end_reason: null });
    expect(simulator().liveLegs()).toBe(1);
    await h.clock.advanceSeconds(3);
    expect((await row(id)).status).toBe('connected');
  });

  it('the queued expiry spares an intent claimed as it fires', async () => {
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t);
    const id: string = requested.body.request_id;
    await h.clock.advanceSeconds(60);
    // a claim landing between the reaper's select and its update (staged: the claim itself refuses expired intents)
    const claim = async () => {
      await h.services.db.query(`UPDATE call_intents SET status = 'claimed', claimed_at = $2, engine_id = $3 WHERE id = $1`, [
        id,
        h.clock.now(),
        agent.engineId,
      ]);
    };
    const db = racing((text) => text.includes("status = 'queued' AND expires_at"), claim);
    await createReaper({ db, bus: h.services.bus, clock: h.clock, providers: h.services.providers }).tick();
    expect(await row(id)).toMatchObject({ status: 'claimed', end_reason: null });
  });

  /** An outbound call to `number` answered (3 s after it was dialed), whose callbacks from then on are lost. */
  async function answeredWithCallbacksLostTo(number?: string) {
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t, number === undefined ? {} : { phone_number: number });
    const id: string = requested.body.request_id;
    await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    await h.clock.advanceSeconds(3);
    const answered = await row(id);
    expect(answered.status).toBe('connected');
    deliverWebhooks(true);
    return { agent, id, answered };
  }

  it('an answered call whose final callback is lost is ended 30 s past its time limit, at the limit, and billed for the limit', async () => {
    const { agent, id, answered } = await answeredWithCallbacksLostTo();
    const limit = answered.time_limit_seconds!;
    const endsAt = answered.answered_at! + (limit + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) * 1000;
    // the window keeps heartbeating (on the call) throughout: no silent-engine rule applies
    while (h.clock.now() + 60_000 < endsAt) {
      await h.clock.advanceSeconds(60);
      await heartbeat(api, agent.engineToken, { call_id: id, busy: true });
      await tick();
    }
    await h.clock.advance(endsAt - 1000 - h.clock.now());
    await tick();
    expect((await row(id)).status).toBe('connected');
    const balanceBefore = await balance();
    await h.clock.advanceSeconds(1);
    await tick();
    const ended = await row(id);
    expect(ended).toMatchObject({ status: 'completed', end_reason: 'time_limit' });
    // ended when the provider ended it, at the limit: its duration is what it was billed for, not the limit and the grace
    expect(ended.ended_at).toBe(answered.answered_at! + limit * 1000);
    expect(Number(ended.charge_micros)).toBe(Math.ceil((limit * Number(ended.per_minute_micros)) / 60));
    expect(balanceBefore - (await balance())).toBe(Number(ended.charge_micros));
    expect(simulator().liveLegs()).toBe(0);
    deliverWebhooks(false);
    await heartbeat(api, agent.engineToken); // the window is idle again
    const next = await requestCall(api, t);
    expect(next.status, JSON.stringify(next.body)).toBe(202);
  });

  it('an outbound call still ringing with its final callback lost is no_answer 30 s past the 30 s ring timeout', async () => {
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t, { phone_number: MAGIC_NUMBERS.noAnswer });
    const id: string = requested.body.request_id;
    await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    const dialedAt = (await row(id)).dialing_at!;
    await h.clock.advanceSeconds(1);
    expect((await row(id)).status).toBe('ringing');
    deliverWebhooks(true); // the provider's no-answer at 31 s never arrives
    const endsAt = dialedAt + (RING_TIMEOUT_SECONDS + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) * 1000;
    await h.clock.advance(endsAt - 1000 - h.clock.now());
    // the ring ran out: the window's device lost its leg, and the window says it holds no call
    await heartbeat(api, agent.engineToken);
    await tick();
    expect((await row(id)).status).toBe('ringing');
    await h.clock.advanceSeconds(1);
    await tick();
    expect(await row(id)).toMatchObject({ status: 'no_answer', end_reason: 'ring_timeout', charge_micros: null });
    expect(simulator().liveLegs()).toBe(0);
  });

  it('an outbound call whose answer callback was lost is not cut at the ring timeout while its window holds it; its final callback bills it, else the time limit ends it', async () => {
    for (const final of [true, false]) {
      const agent = await readyAgent(api, t);
      const requested = await requestCall(api, t, { phone_number: MAGIC_NUMBERS.noAnswer });
      const id: string = requested.body.request_id;
      await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
      await h.clock.advanceSeconds(1);
      deliverWebhooks(true); // the answer's in-progress never arrives: the row stays ringing
      const dialed = await row(id);
      const hangups = vi.spyOn(h.services.providers.byName('simulated'), 'hangup');
      try {
        // well past the ring timeout and its grace, the window still holds the call: it is talking
        for (let s = 0; s < 3; s++) {
          await h.clock.advanceSeconds(30);
          await heartbeat(api, agent.engineToken, { call_id: id, busy: true });
          await tick();
        }
        expect((await row(id)).status, `final ${final}`).toBe('ringing');
        expect(hangups).not.toHaveBeenCalled();
      } finally {
        hangups.mockRestore();
      }
      deliverWebhooks(false);
      if (final) {
        // the far end hangs up after 80 s of talk: the final callback revises the call as answered, and bills it
        const talk = Math.floor((h.clock.now() - dialed.dialing_at!) / 1000) - 5;
        const leg = { CallSid: dialed.provider_leg_sid!, ParentCallSid: dialed.provider_call_sid!, CallStatus: 'completed', CallDuration: String(talk), AccountSid: t.accountId };
        expect((await signedStatus(t, id, leg)).status).toBe(204);
        const ended = await row(id);
        expect(ended).toMatchObject({ status: 'completed' });
        expect(Number(ended.charge_micros)).toBe(Math.ceil((talk * Number(ended.per_minute_micros)) / 60));
      } else {
        // no final callback either: past the time limit (and the grace), ended as the answered call it was not seen to be
        const limitEnd = dialed.dialing_at! + (dialed.time_limit_seconds! + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) * 1000;
        while (h.clock.now() + 60_000 < limitEnd) {
          await h.clock.advanceSeconds(60);
          await heartbeat(api, agent.engineToken, { call_id: id, busy: true });
          await tick();
        }
        await h.clock.advance(limitEnd - 1000 - h.clock.now());
        await heartbeat(api, agent.engineToken, { call_id: id, busy: true }); // still holding it (a window silent 30 s holds nothing)
        await tick();
        expect((await row(id)).status).toBe('ringing');
        await h.clock.advanceSeconds(1);
        await tick();
        expect((await row(id)).status).toBe('no_answer');
      }
      await heartbeat(api, agent.engineToken); // idle again
    }
  });

  it('an inbound call still incoming with its final callback lost is no_answer 30 s past its ring window', async () => {
    const agent = await readyAgent(api, t);
    await command(api, agent.widgetToken, { kind: 'availability', request_id: 'available', available: true });
    await heartbeat(api, agent.engineToken);
    const inbound = await h.services.calls.injectInbound({ integrationId: t.integrationId, from: '+12025550777' });
    expect(inbound.status).toBe('incoming');
    deliverWebhooks(true); // the provider's no-answer at the end of the ring window never arrives
    const endsAt = (await row(inbound.call_id)).expires_at + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS * 1000;
    await h.clock.advance(endsAt - 1000 - h.clock.now());
    await heartbeat(api, agent.engineToken); // the ring window over, the window's device no longer rings
    await tick();
    expect((await row(inbound.call_id)).status).toBe('incoming');
    await h.clock.advanceSeconds(1);
    await tick();
    expect(await row(inbound.call_id)).toMatchObject({ status: 'no_answer', end_reason: 'ring_timeout' });
    expect(simulator().liveLegs()).toBe(0);
    deliverWebhooks(false);
    expect((await requestCall(api, t)).status).toBe(202);
  });

  /** An outbound call ringing (the simulator's no-answer number) whose callbacks from now on are lost. */
  async function ringingWithCallbacksLost() {
    const agent = await readyAgent(api, t);
    const requested = await requestCall(api, t, { phone_number: MAGIC_NUMBERS.noAnswer });
    const id: string = requested.body.request_id;
    await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    await h.clock.advanceSeconds(1);
    expect((await row(id)).status).toBe('ringing');
    deliverWebhooks(true);
    return { agent, id };
  }
  /** What the provider's in-progress callback does to the row (staged: the simulator would not answer this number). */
  const answerNow = (id: string) => async () => {
    await h.services.db.query(`UPDATE call_intents SET status = 'connected', answered_at = $2 WHERE id = $1`, [id, h.clock.now()]);
  };

  /**
   * The ring-timeout rule firing on a ringing call its window let go of, with `meanwhile` run once
   * the reaper's statement `decided` has read the call: the call, and how many hangups the rule asked for.
   */
  async function ringTimeoutFiresAs(decided: (text: string) => boolean, meanwhile: (call: { agent: Agent; id: string }) => () => Promise<void>) {
    const call = await ringingWithCallbacksLost();
    const dialedAt = (await row(call.id)).dialing_at!;
    await h.clock.advance(dialedAt + (RING_TIMEOUT_SECONDS + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) * 1000 - h.clock.now());
    await heartbeat(api, call.agent.engineToken); // let go of: overdue (a call its window holds is left alone)
    const db = racing(decided, meanwhile(call));
    const hangups = vi.spyOn(h.services.providers.byName('simulated'), 'hangup');
    try {
      await createReaper({ db, bus: h.services.bus, clock: h.clock, providers: h.services.providers }).tick();
      return { call: await row(call.id), hangupsAsked: hangups.mock.calls.length };
    } finally {
      hangups.mockRestore();
    }
  }

  it('the ring-timeout rule spares, and does not hang up, a call answered as it fires', async () => {
    const { call, hangupsAsked } = await ringTimeoutFiresAs((text) => text.includes("status IN ('dialing', 'ringing') AND dialing_at"), ({ id }) => answerNow(id));
    expect(call).toMatchObject({ status: 'connected', end_reason: null, ended_at: null });
    expect(hangupsAsked).toBe(0);
  });

  it('the ring-timeout rule spares, and does not hang up, a call its window holds again as it fires', async () => {
    const heldAgain = ({ agent, id }: { agent: Agent; id: string }) => () => heartbeat(api, agent.engineToken, { call_id: id, busy: true }).then(() => undefined);
    const { call, hangupsAsked } = await ringTimeoutFiresAs((text) => text.includes('AS overdue_at'), heldAgain);
    expect(call).toMatchObject({ status: 'ringing', orphaned: false, ended_at: null });
    expect(hangupsAsked).toBe(0);
  });

  it('a hangup decided on a ringing call records it completed, and bills it, when the answer lands before the hangup is recorded', async () => {
    const { id } = await ringingWithCallbacksLost();
    const balanceBefore = await balance();
    // The hangup reads the call (ringing), asks the provider, reads it again (still ringing: the
    // callbacks are lost), and then the answer lands before it records the end.
    let reads = 0;
    const db = racing((text) => text.startsWith('SELECT * FROM call_intents WHERE id') && ++reads === 2, async () => {
      await h.clock.advanceSeconds(4);
      await answerNow(id)();
      await h.clock.advanceSeconds(6);
    });
    const ended = await hangupCall({ db, clock: h.clock, providers: h.services.providers }, id, 'hangup');
    expect(ended.call).toMatchObject({ status: 'completed', end_reason: 'hangup' });
    const charge = Math.ceil((6 * Number(ended.call.per_minute_micros)) / 60);
    expect(Number(ended.call.charge_micros)).toBe(charge);
    expect(balanceBefore - (await balance())).toBe(charge);
  });

  it("keeps the reaper's outcome when the provider's callback for the reaper's own hangup comes back", async () => {
    const agent = await readyAgent(api, t);
    await command(api, agent.widgetToken, { kind: 'availability', request_id: 'available-again', available: true });
    await heartbeat(api, agent.engineToken);
    const inbound = await h.services.calls.injectInbound({ integrationId: t.integrationId, from: '+12025550778' });
    // The provider rings longer than the service's ring window says: the leg is still up when the
    // reaper ends the call, and the callback for the reaper's hangup arrives. For an incoming call,
    // a hangup by us reads as the agent declining it; the reaper's outcome must stand.
    const overdueAt = h.clock.now() - PROVIDER_FINAL_CALLBACK_GRACE_SECONDS * 1000 - 1;
    // past its ring window, and the window no longer reports it (else its answer would count as lost)
    await h.services.db.query('UPDATE call_intents SET expires_at = $2, orphaned = true WHERE id = $1', [inbound.call_id, overdueAt]);
    expect(simulator().liveLegs()).toBe(1);
    await tick();
    expect(await row(inbound.call_id)).toMatchObject({ status: 'no_answer', end_reason: 'ring_timeout' });
    expect(simulator().liveLegs()).toBe(0);
  });

  it('ends a call two hangups asked for with different reasons as the first asked, whether the provider\'s callback or the hangup records it', async () => {
    for (const callbackFirst of [true, false]) {
      const agent = await readyAgent(api, t);
      await command(api, agent.widgetToken, { kind: 'availability', request_id: `available-${callbackFirst}`, available: true });
      await heartbeat(api, agent.engineToken);
      const inbound = await h.services.calls.injectInbound({ integrationId: t.integrationId, from: '+12025550778' });
      // the integration's revocation asked first (its provider hangup failed: the reason stays stored)
      await h.services.db.query("UPDATE call_intents SET hangup_requested_at = $2, hangup_reason = 'integration_revoked' WHERE id = $1", [inbound.call_id, h.clock.now()]);
      deliverWebhooks(!callbackFirst);
      // then the agent hangs up
      await hangupCall({ db: h.services.db, clock: h.clock, providers: h.services.providers }, inbound.call_id, 'hangup');
      expect(await row(inbound.call_id), `callback first: ${callbackFirst}`).toMatchObject({ status: 'no_answer', end_reason: 'integration_revoked' });
      deliverWebhooks(false);
    }
  });

  /** An outbound call answered, whose far end hangs up 40 s later, and whose callbacks from then on are lost. */
  async function answeredWithCallbacksLost() {
    simulator().faults.records = 'kept';
    return answeredWithCallbacksLostTo(`${MAGIC_NUMBERS.farEndHangupPrefix}40`);
  }

  /** The call ended when the far end hung up, 40 s after the answer, and was billed for those 40 s. */
  async function expectSettledAtFarEnd(id: string, answered: CallRow, balanceBefore: number) {
    const ended = await row(id);
    expect(ended).toMatchObject({ status: 'completed', end_reason: 'far_end', ended_at: answered.answered_at! + 40_000 });
    expect(Number(ended.charge_micros)).toBe(Math.ceil((40 * Number(ended.per_minute_micros)) / 60));
    expect(balanceBefore - (await balance())).toBe(Number(ended.charge_micros));
  }

  /** Heartbeats of a window holding no call, and reaper ticks, for `seconds`. */
  async function idleFor(engineToken: string, seconds: number) {
    for (let s = 0; s < seconds; s += 5) {
      await h.clock.advanceSeconds(Math.min(5, seconds - s));
      await heartbeat(api, engineToken);
      await tick();
    }
  }

  it("settles a call its window let go of, whose final callback was lost, from the provider's record 30 s later: ended when the far end hung up, billed for the talk, the agent free", async () => {
    const { agent, id, answered } = await answeredWithCallbacksLost();
    for (const seconds of [20, 21]) {
      await h.clock.advanceSeconds(seconds); // the far end hangs up at 40 s; the provider's completed never arrives
      await heartbeat(api, agent.engineToken, { call_id: id, busy: true }); // the window reports the call until its device lets go
      await tick();
    }
    expect((await row(id)).status).toBe('connected');
    const records = vi.spyOn(simulator(), 'callRecord');
    try {
      await heartbeat(api, agent.engineToken); // the device's call ended: the window holds none
      expect((await row(id)).orphaned).toBe(true);
      const balanceBefore = await balance();
      const settledBefore = await settledCount();
      // the callback of a hang up comes within seconds: the record is not read before the grace
      await idleFor(agent.engineToken, PROVIDER_FINAL_CALLBACK_GRACE_SECONDS - 1);
      expect(records).not.toHaveBeenCalled();
      expect((await row(id)).status).toBe('connected');
      await idleFor(agent.engineToken, 1);
      expect(records).toHaveBeenCalledTimes(1);
      await expectSettledAtFarEnd(id, answered, balanceBefore);
      expect(await settledCount()).toBe(settledBefore + 1); // the operator sees callbacks going missing
    } finally {
      records.mockRestore();
    }
    deliverWebhooks(false);
    expect((await requestCall(api, t)).status).toBe(202);
  });

  it("ends a call the agent hangs up when the provider was asked, not when it answered seconds later: the wait is not billed as talk", async () => {
    const { agent, id } = await answeredWithCallbacksLostTo();
    await h.clock.advanceSeconds(30);
    const askedAt = h.clock.now();
    const hangup = simulator().hangup.bind(simulator());
    const slow = vi.spyOn(simulator(), 'hangup').mockImplementationOnce(async (...args) => {
      await h.clock.advanceSeconds(4); // the provider's answer takes 4 s (its completed is lost)
      return hangup(...args);
    });
    try {
      expect((await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-slow-provider' })).status).toBe(200);
    } finally {
      slow.mockRestore();
    }
    const ended = await row(id);
    expect(ended).toMatchObject({ status: 'completed', end_reason: 'hangup', ended_at: askedAt });
    expect(Number(ended.charge_micros)).toBe(Math.ceil((callDurationSeconds(ended, h.clock.now()) * Number(ended.per_minute_micros)) / 60));
    expect(callDurationSeconds(ended, h.clock.now())).toBe(30); // hung up 30 s after the answer
    deliverWebhooks(false);
    await heartbeat(api, agent.engineToken);
  });

  it("ends a call whose far end hung up before the agent did (its final callback lost) as the provider recorded it: at the far end's hang up, billed for the talk", async () => {
    const { agent, id, answered } = await answeredWithCallbacksLost();
    await h.clock.advanceSeconds(55); // the far end hangs up at 40 s; the agent, still shown the call, hangs up at 58 s
    const balanceBefore = await balance();
    expect((await command(api, agent.widgetToken, { kind: 'hangup', request_id: 'hangup-after-far-end' })).status).toBe(200);
    await expectSettledAtFarEnd(id, answered, balanceBefore);
    deliverWebhooks(false);
    await heartbeat(api, agent.engineToken);
    expect((await requestCall(api, t)).status).toBe(202);
  });

  it("settles an outbound call none of whose dialed leg's callbacks came (a store outage through the whole call) from the record of the leg its window's leg dialed: completed, billed for the talk, the leg bound", async () => {
    simulator().faults.records = 'kept';
    const agent = await readyAgent(api, t);
    deliverWebhooks(true); // from before the dial: the leg's ringing, answer and completed are all lost
    const id = (await requestCall(api, t, { phone_number: `${MAGIC_NUMBERS.farEndHangupPrefix}40` })).body.request_id as string;
    await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    const dialed = await row(id);
    // the voice webhook came (the window's leg): the dialed leg, never named by a callback, is not bound
    expect(dialed).toMatchObject({ status: 'dialing', provider_leg_sid: null });
    const account = (await loadProviderAccount(h.services.db, t.accountId))!;
    const legs = vi.spyOn(simulator(), 'dialedLegRecord');
    try {
      // the far end answers and hangs up 40 s later, while the window holds the call
      await heldUntil(agent.engineToken, id, h.clock.now() + 50_000);
      expect((await row(id)).status).toBe('dialing');
      const balanceBefore = await balance();
      await idleFor(agent.engineToken, PROVIDER_FINAL_CALLBACK_GRACE_SECONDS + 5); // the window let go of it
      expect(legs).toHaveBeenCalledWith(expect.objectContaining({ accountId: t.accountId }), dialed.provider_call_sid, undefined);
      const ended = await row(id);
      expect(ended).toMatchObject({ status: 'completed', end_reason: 'far_end' });
      // the leg bound is the one the window's leg dialed, as the simulator's record of that leg says
      expect(ended.provider_leg_sid).not.toBe(dialed.provider_call_sid);
      expect(await simulator().callRecord(account, ended.provider_leg_sid!)).toMatchObject({ parentCallSid: dialed.provider_call_sid, status: 'completed', durationSeconds: 40 });
      expect(ended.ended_at! - ended.answered_at!).toBe(40_000);
      expect(Number(ended.charge_micros)).toBe(Math.ceil((40 * Number(ended.per_minute_micros)) / 60));
      expect(balanceBefore - (await balance())).toBe(Number(ended.charge_micros));
    } finally {
      legs.mockRestore();
    }
    deliverWebhooks(false);
    expect((await requestCall(api, t)).status).toBe(202);
  });

  it("reads nothing, and counts nothing, for a hang up whose callback comes after the window let go: the grace is the callback's", async () => {
    const { agent, id } = await answeredWithCallbacksLost();
    await h.clock.advanceSeconds(41);
    const records = vi.spyOn(simulator(), 'callRecord');
    try {
      const settledBefore = await settledCount();
      await heartbeat(api, agent.engineToken); // the window let go first
      await idleFor(agent.engineToken, 10);
      const leg = (await row(id)).provider_leg_sid!;
      // then the provider's completed lands (in a test: delivered by hand, the simulator's was lost)
      expect((await signedStatus(t, id, { CallSid: leg, ParentCallSid: (await row(id)).provider_call_sid!, CallStatus: 'completed', CallDuration: '40', AccountSid: t.accountId })).status).toBe(204);
      expect((await row(id)).status).toBe('completed');
      await idleFor(agent.engineToken, 60);
      expect(records).not.toHaveBeenCalled();
      expect(await settledCount()).toBe(settledBefore);
    } finally {
      records.mockRestore();
    }
  });

  it("answers a call the store has ringing, its window let go of, when the provider's record says its leg is in progress (the answer's callback was lost): not rung out, and the far end's hang up then settles it", async () => {
    simulator().faults.records = 'kept';
    const agent = await readyAgent(api, t);
    // answered 21 s after it was dialed, its ringing reported before
    const id = (await requestCall(api, t, { phone_number: MAGIC_NUMBERS.longRinging })).body.request_id as string;
    await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    await h.clock.advanceSeconds(2);
    expect((await row(id)).status).toBe('ringing');
    deliverWebhooks(true); // the answer's in-progress is lost
    const records = vi.spyOn(simulator(), 'callRecord');
    const hangups = vi.spyOn(simulator(), 'hangup');
    try {
      await idleFor(agent.engineToken, 10); // the window let go of it (closed, say): orphaned
      const { orphaned_at: orphanedAt, dialing_at: dialedAt } = await row(id);
      expect(orphanedAt).not.toBeNull();
      await idleFor(agent.engineToken, Math.ceil((orphanedAt! + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS * 1000 - h.clock.now()) / 1000));
      expect(records).toHaveBeenCalledTimes(1);
      const answered = await row(id);
      // answered at the read: no earlier than the far end did, so never billed for more than was talked
      expect(answered.status).toBe('connected');
      expect(answered.answered_at).toBe(answered.provider_read_at);
      expect(answered.answered_at).toBeGreaterThanOrEqual(dialedAt! + 21_000);
      await idleFor(agent.engineToken, 60); // past the ring timeout and its grace: not rung out
      expect((await row(id)).status).toBe('connected');
      expect(hangups).not.toHaveBeenCalled();
      // the far end hangs up (through the provider: a hang up reaching it from elsewhere)
      await simulator().hangup((await loadProviderAccount(h.services.db, t.accountId))!, answered.provider_leg_sid!);
      const hungUpAt = h.clock.now();
      hangups.mockClear();
      const balanceBefore = await balance();
      await idleFor(agent.engineToken, 60);
      const ended = await row(id);
      expect(ended).toMatchObject({ status: 'completed', end_reason: 'far_end', ended_at: hungUpAt, answered_at: answered.answered_at });
      expect(Number(ended.charge_micros)).toBe(Math.ceil((callDurationSeconds(ended, h.clock.now()) * Number(ended.per_minute_micros)) / 60));
      expect(balanceBefore - (await balance())).toBe(Number(ended.charge_micros));
      expect(hangups).not.toHaveBeenCalled();
    } finally {
      records.mockRestore();
      hangups.mockRestore();
    }
  });

  /** Heartbeats of a window reporting the call (a reloaded window), and reaper ticks, until `until`, a minute at a time. */
  async function heldUntil(engineToken: string, id: string, until: number) {
    while (h.clock.now() + 60_000 < until) {
      await h.clock.advanceSeconds(60);
      await heartbeat(api, engineToken, { call_id: id, busy: true });
      await tick();
    }
    await h.clock.advance(until - h.clock.now());
    await heartbeat(api, engineToken, { call_id: id, busy: true });
  }

  it("leaves an overdue call whose record could not be read for the next read, a minute on (it then settles it), and ends one still unread after 5 minutes by the reaper's own rules", async () => {
    for (const readable of [true, false]) {
      const { agent, id, answered } = await answeredWithCallbacksLost();
      const overdueAt = answered.answered_at! + (answered.time_limit_seconds! + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) * 1000;
      await heldUntil(agent.engineToken, id, overdueAt);
      simulator().faults.records = 'unreachable'; // Twilio down, or slow past the timeout
      const balanceBefore = await balance();
      await tick();
      expect((await row(id)).status, `readable: ${readable}`).toBe('connected');
      if (readable) {
        simulator().faults.records = 'kept';
        await heldUntil(agent.engineToken, id, h.clock.now() + PROVIDER_RECHECK_SECONDS * 1000);
        await tick();
        await expectSettledAtFarEnd(id, answered, balanceBefore);
      } else {
        await heldUntil(agent.engineToken, id, overdueAt + PROVIDER_RECORD_PATIENCE_SECONDS * 1000 - 1000);
        await tick();
        expect((await row(id)).status).toBe('connected');
        await h.clock.advanceSeconds(1);
        await tick();
        expect(await row(id)).toMatchObject({ status: 'completed', end_reason: 'time_limit', ended_at: answered.answered_at! + answered.time_limit_seconds! * 1000 });
      }
      deliverWebhooks(false);
      await heartbeat(api, agent.engineToken);
    }
  });

  it('ends an overdue call past its patience in a tick whose earlier rule found the provider unreachable (a silent window\'s hangup failed)', async () => {
    const { agent, id, answered } = await answeredWithCallbacksLost();
    const overdueAt = answered.answered_at! + (answered.time_limit_seconds! + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) * 1000;
    simulator().faults.records = 'unreachable';
    await heldUntil(agent.engineToken, id, overdueAt + PROVIDER_RECORD_PATIENCE_SECONDS * 1000 - 120_000);
    expect((await row(id)).status).toBe('connected');
    // another agent's call, whose window then goes silent, and whose hangup the provider cannot carry
    const { email } = await createMember(h.services, { accountId: t.accountId, email: `silent-${driver}@acme.example`, name: 'Silent', departmentId: t.salesId });
    const silent = await readyAgent(api, t, email);
    const other = (await requestCall(api, t, { agent: { type: 'email', value: email } })).body.request_id as string;
    await api.post('/engine/claim', { request_id: other }, { auth: silent.engineToken });
    // the first window holds its call on, the second is silent past 90 s, and the first call's patience ends: one tick
    await h.clock.advanceSeconds(60);
    await heartbeat(api, agent.engineToken, { call_id: id, busy: true });
    await h.clock.advanceSeconds(61);
    await heartbeat(api, agent.engineToken, { call_id: id, busy: true });
    // the provider does not answer the silent window's hangup (the tick's first request of it)
    const hangups = vi.spyOn(simulator(), 'hangup').mockRejectedValueOnce(new ProviderUnreachable('the provider did not answer'));
    try {
      await tick();
      expect(hangups).toHaveBeenCalledTimes(1);
      expect((await row(other)).ended_at).toBeNull();
      expect(await row(id)).toMatchObject({ status: 'completed', end_reason: 'time_limit', ended_at: answered.answered_at! + answered.time_limit_seconds! * 1000 });
    } finally {
      hangups.mockRestore();
    }
    deliverWebhooks(false);
    simulator().faults.records = 'kept';
  });

  it('ends an overdue call past its patience while the provider is down though older overdue calls within theirs fill the places', async () => {
    const onePlace = createReaper({ db: h.services.db, bus: h.services.bus, clock: h.clock, providers: h.services.providers, providerCallsPerTick: 1 });
    simulator().faults.records = 'unreachable'; // the provider does not answer
    const older = await answeredWithCallbacksLostTo(); // overdue later (a longer time limit), within its patience at the tick
    const { email } = await createMember(h.services, { accountId: t.accountId, email: `patience-${driver}@acme.example`, name: 'Second', departmentId: t.salesId });
    const second = await readyAgent(api, t, email);
    deliverWebhooks(false); // its answer comes through; its final callback will not
    const newer = (await requestCall(api, t, { agent: { type: 'email', value: email } })).body.request_id as string;
    await api.post('/engine/claim', { request_id: newer }, { auth: second.engineToken });
    await h.clock.advanceSeconds(3);
    expect((await row(newer)).status).toBe('connected');
    deliverWebhooks(true);
    await h.services.db.query('UPDATE call_intents SET time_limit_seconds = $2 WHERE id = $1', [older.id, 600]);
    await h.services.db.query('UPDATE call_intents SET time_limit_seconds = $2 WHERE id = $1', [newer, 60]);
    // both windows hold their calls on (no tick meanwhile): the newer is past its patience, the older within its own
    const until = (await row(older.id)).answered_at! + (600 + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS + 10) * 1000;
    while (h.clock.now() < until) {
      await h.clock.advanceSeconds(60);
      await heartbeat(api, older.agent.engineToken, { call_id: older.id, busy: true });
      await heartbeat(api, second.engineToken, { call_id: newer, busy: true });
    }
    await onePlace.tick();
    expect((await row(older.id)).status).toBe('connected');
    expect(await row(newer)).toMatchObject({ status: 'completed', end_reason: 'time_limit' });
    deliverWebhooks(false);
  });

  it("lets the node reading an overdue call's record end it: another node ticking meanwhile neither ends it nor hangs it up", async () => {
    const { agent, id, answered } = await answeredWithCallbacksLost();
    await heldUntil(agent.engineToken, id, answered.answered_at! + (answered.time_limit_seconds! + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) * 1000);
    const other = createReaper({ db: h.services.db, bus: h.services.bus, clock: h.clock, providers: h.services.providers });
    // this node's read takes a while (Twilio answering in 300 ms, say)
    let answer!: () => void;
    const answering = new Promise<void>((resolve) => (answer = resolve));
    const read = simulator().callRecord.bind(simulator());
    const records = vi.spyOn(simulator(), 'callRecord').mockImplementationOnce(async (...args) => {
      await answering;
      return read(...args);
    });
    const hangups = vi.spyOn(simulator(), 'hangup');
    try {
      const balanceBefore = await balance();
      const reading = tick();
      await vi.waitFor(() => expect(records).toHaveBeenCalledTimes(1));
      await other.tick();
      expect((await row(id)).status).toBe('connected');
      answer();
      await reading;
      await expectSettledAtFarEnd(id, answered, balanceBefore);
      expect(hangups).not.toHaveBeenCalled();
    } finally {
      records.mockRestore();
      hangups.mockRestore();
    }
  });

  it("ends an overdue call as the provider's record says when its window still reports it (a reloaded window): billed for the talk, not up to the time limit", async () => {
    const { agent, id, answered } = await answeredWithCallbacksLost();
    const hangups = vi.spyOn(h.services.providers.byName('simulated'), 'hangup');
    try {
      const endsAt = answered.answered_at! + (answered.time_limit_seconds! + PROVIDER_FINAL_CALLBACK_GRACE_SECONDS) * 1000;
      while (h.clock.now() + 60_000 < endsAt) {
        await h.clock.advanceSeconds(60);
        await heartbeat(api, agent.engineToken, { call_id: id, busy: true });
        await tick();
      }
      expect((await row(id)).status).toBe('connected');
      const balanceBefore = await balance();
      await h.clock.advance(endsAt - h.clock.now());
      await tick();
      await expectSettledAtFarEnd(id, answered, balanceBefore);
      expect(hangups).not.toHaveBeenCalled(); // its leg ended long ago: nothing to hang up
    } finally {
      hangups.mockRestore();
    }
  });

  it('reads the record of a call its window let go of 30 s later, then once a minute while its leg runs, one node at a time; a provider that cannot be reached changes nothing', async () => {
    simulator().faults.records = 'kept';
    const agent = await readyAgent(api, t);
    const id = (await requestCall(api, t)).body.request_id as string;
    await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
    await h.clock.advanceSeconds(6);
    expect((await row(id)).status).toBe('connected');
    const records = vi.spyOn(simulator(), 'callRecord');
    const logged: string[] = [];
    // a second API node's reaper on the same store, ticking at the same moments
    const other = createReaper({ db: h.services.db, bus: h.services.bus, clock: h.clock, providers: h.services.providers, log: (message) => logged.push(message) });
    const bothTickIdle = async (seconds: number) => {
      await h.clock.advanceSeconds(seconds);
      await heartbeat(api, agent.engineToken);
      await Promise.all([tick(), other.tick()]);
    };
    try {
      await heartbeat(api, agent.engineToken); // the window no longer reports the call; its leg still runs
      await Promise.all([tick(), other.tick()]);
      for (const seconds of [10, 10, 9]) await bothTickIdle(seconds);
      expect(records).not.toHaveBeenCalled();
      await bothTickIdle(1);
      expect(records).toHaveBeenCalledTimes(1);
      expect(await row(id)).toMatchObject({ status: 'connected', orphaned: true });
      for (const seconds of [10, 10, 10, 10, 10, 9]) await bothTickIdle(seconds);
      expect(records).toHaveBeenCalledTimes(1);
      simulator().faults.records = 'unreachable';
      await h.clock.advanceSeconds(1);
      await other.tick();
      expect(records).toHaveBeenCalledTimes(2);
      expect(logged.join('\n')).toContain(`could not read the provider's record of call ${id}`);
      expect(await row(id)).toMatchObject({ status: 'connected', ended_at: null });
    } finally {
      records.mockRestore();
    }
  });

  it("starts no more reads in a tick once the provider could not be reached (one timeout per lane, not one per call), and starts over for a call its window holds again", async () => {
    simulator().faults.records = 'kept';
    const calls: Array<{ id: string; engineToken: string }> = [];
    const emails = [t.agent.email];
    for (let n = 1; n < PROVIDER_REQUESTS_AT_ONCE + 2; n++) {
      emails.push((await createMember(h.services, { accountId: t.accountId, email: `agent${n}@acme.example`, name: `Agent ${n}`, departmentId: t.salesId })).email);
    }
    for (const email of emails) {
      const agent = await readyAgent(api, t, email);
      const id = (await requestCall(api, t, { agent: { type: 'email', value: email } })).body.request_id as string;
      await api.post('/engine/claim', { request_id: id }, { auth: agent.engineToken });
      calls.push({ id, engineToken: agent.engineToken });
    }
    await h.clock.advanceSeconds(6);
    for (const { engineToken } of calls) await heartbeat(api, engineToken); // both let go: orphaned
    const records = vi.spyOn(simulator(), 'callRecord');
    try {
      simulator().faults.records = 'unreachable';
      await h.clock.advanceSeconds(PROVIDER_FINAL_CALLBACK_GRACE_SECONDS);
      for (const { engineToken } of calls) await heartbeat(api, engineToken);
      await tick();
      // at most the lanes' first reads, on their way together before one failed; none started after
      expect(records.mock.calls.length).toBeGreaterThanOrEqual(1);
      expect(records.mock.calls.length).toBeLessThanOrEqual(PROVIDER_REQUESTS_AT_ONCE);
      // the others are due still, and read on the next ticks; each once (its next read is a minute on)
      for (let second = 0; second < calls.length && records.mock.calls.length < calls.length; second++) {
        await h.clock.advanceSeconds(1);
        await tick();
      }
      expect(records).toHaveBeenCalledTimes(calls.length);
      expect(new Set(records.mock.calls.map(([, sid]) => sid)).size).toBe(calls.length);
      // one call's window holds it again: its next let-go waits the grace again, from then
      const [first] = calls;
      await heartbeat(api, first!.engineToken, { call_id: first!.id, busy: true });
      expect(await row(first!.id)).toMatchObject({ orphaned: false, orphaned_at: null, provider_read_at: null });
    } finally {
      records.mockRestore();
    }
  });

  async function settledCount(): Promise<number> {
    const text = await h.services.metrics.registry.getSingleMetricAsString('c2c_calls_settled_by_provider_record_total');
    return Number(/^c2c_calls_settled_by_provider_record_total (\d+)$/m.exec(text)![1]);
  }

  async function balance(): Promise<number> {
    const [account] = await h.services.db.query<{ balance_micros: string }>('SELECT balance_micros FROM accounts WHERE id = $1', [t.accountId]);
    return Number(account!.balance_micros);
  }
});
