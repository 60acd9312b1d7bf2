/**
 * A command the call window could not carry out (a failed ack) reaches the agent's widgets as
 * WidgetState.failed_command, with a new version, whether the ack came in a heartbeat or on the
 * socket; a command carried out, or a failure acked again, changes nothing.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMember } from '../../api/domain/operator/accounts.js';
import { WINDOW_CLOSED } from '../../api/domain/engines/closed-commands.js';
import { closeIntegrationWindows } from '../../api/domain/operator/revocation.js';
import { CLOSED_COMMANDS_SWEPT_FOR_MS } from '../../api/domain/reaper.js';
import { WidgetState } from '../../shared/schemas/widget-api.js';
import type { HeartbeatRequest } from '../../shared/schemas/engine-api.js';
import { storeDrivers } from '../helpers/env.js';
import { command, heartbeat, READY, readyAgent, requestCall, widgetState, type Agent } from '../helpers/flows.js';
import { client, createHarness, type Client, type Harness } from '../helpers/harness.js';
import { seedTenant, type Tenant } from '../helpers/tenant.js';

describe.each(storeDrivers())('commands the call window could not carry out, on %s', (driver) => {
  let h: Harness;
  let api: Client;
  let t: Tenant;
  let agent: Agent;

  beforeAll(async () => {
    h = await createHarness(driver);
    api = client(h.app);
    t = await seedTenant(h.services);
    agent = await readyAgent(api, t);
  });
  afterAll(() => h.close());

  const queue = async (requestId: string) => {
    const sent = await command(api, agent.widgetToken, { kind: 'focus', request_id: requestId });
    expect(sent.body).toMatchObject({ ok: true, status: 'queued' });
    return sent.body.command_id as number;
  };

  it('starts with none', async () => {
    const state = await widgetState(api, agent.widgetToken);
    expect(WidgetState.parse(state.body).failed_command).toBeNull();
  });

  it('shows the failure acked in a heartbeat, with the window\'s reason, in a new version', async () => {
    const id = await queue('f-heartbeat');
    const before = (await widgetState(api, agent.widgetToken)).body;
    await h.clock.advanceSeconds(3);
    const beat = await heartbeat(api, agent.engineToken, { acks: [{ command_id: id, result: 'failed', error: 'The voice device is not ready.' }] });
    expect(beat.status).toBe(200);
    const after = (await widgetState(api, agent.widgetToken)).body;
    expect(after.version).toBeGreaterThan(before.version);
    expect(after.failed_command).toEqual({
      request_id: 'f-heartbeat',
      kind: 'focus',
      error: 'command_failed',
      message: 'The voice device is not ready.',
      failed_at: Math.floor(h.clock.now() / 1000),
    });
  });

  it('shows the failure acked on the socket; a second ack of it and a command carried out change nothing', async () => {
    const failing = await queue('f-socket');
    const working = await queue('f-done');
    const context = await h.services.engines.authenticate(agent.engineToken);
    await h.services.engines.ack(context, [{ command_id: failing, result: 'failed' }]);
    const shown = (await widgetState(api, agent.widgetToken)).body;
    expect(shown.failed_command).toMatchObject({ request_id: 'f-socket', message: 'The call window could not carry out the command.' });
    await h.services.engines.ack(context, [{ command_id: failing, result: 'failed', error: 'again' }]);
    await h.services.engines.ack(context, [{ command_id: working, result: 'done' }]);
    const later = (await widgetState(api, agent.widgetToken)).body;
    expect(later.version).toBe(shown.version);
    expect(later.failed_command).toEqual(shown.failed_command);
  });

  it('shows the newest of several failures in one report, whatever their order in it', async () => {
    const older = await queue('f-older');
    const newer = await queue('f-newer');
    const beat = await heartbeat(api, agent.engineToken, {
      acks: [
        { command_id: newer, result: 'failed', error: 'newer' },
        { command_id: older, result: 'failed', error: 'older' },
      ],
    });
    expect(beat.status).toBe(200);
    expect((await widgetState(api, agent.widgetToken)).body.failed_command).toMatchObject({ request_id: 'f-newer', message: 'newer' });
  });

  it('keeps a newer failure when an older one is recorded after it (a heartbeat and a socket ack crossing)', async () => {
    const older = await queue('f-late-older');
    const newer = await queue('f-late-newer');
    const context = await h.services.engines.authenticate(agent.engineToken);
    await h.services.engines.ack(context, [{ command_id: newer, result: 'failed', error: 'newer' }]);
    const shown = (await widgetState(api, agent.widgetToken)).body;
    expect(shown.failed_command).toMatchObject({ request_id: 'f-late-newer' });
    await h.services.engines.ack(context, [{ command_id: older, result: 'failed', error: 'older' }]);
    const later = (await widgetState(api, agent.widgetToken)).body;
    expect(later.failed_command).toEqual(shown.failed_command);
    expect(later.version).toBe(shown.version);
  });

  it('takes the acks even when recording the failure for the widgets fails (the window would not resend them as first acks)', async () => {
    const id = await queue('f-store-hiccup');
    const context = await h.services.engines.authenticate(agent.engineToken);
    const before = (await widgetState(api, agent.widgetToken)).body;
    const query = h.services.db.query.bind(h.services.db);
    const spy = vi.spyOn(h.services.db, 'query').mockImplementation((text: string, params?: readonly unknown[]) => {
      if (text.includes('failed_command = excluded.failed_command')) return Promise.reject(new Error('the store hiccuped'));
      return query(text, params as never);
    });
    try {
      await expect(h.services.engines.ack(context, [{ command_id: id, result: 'failed', error: 'lost' }])).resolves.toBeUndefined();
    } finally {
      spy.mockRestore();
    }
    const [row] = await h.services.db.query<{ status: string; acks: number }>('SELECT status, acks FROM widget_commands WHERE id = $1', [id]);
    expect(row).toMatchObject({ status: 'failed', acks: 1 });
    expect((await widgetState(api, agent.widgetToken)).body.failed_command).toEqual(before.failed_command);
  });

  it("never shows another agent's failure", async () => {
    const ours = (await widgetState(api, agent.widgetToken)).body.failed_command;
    expect(ours).not.toBeNull();
    const other = await seedTenant(h.services);
    const otherAgent = await readyAgent(api, other);
    const sent = await command(api, otherAgent.widgetToken, { kind: 'focus', request_id: 'f-other' });
    const context = await h.services.engines.authenticate(otherAgent.engineToken);
    await h.services.engines.ack(context, [{ command_id: sent.body.command_id, result: 'failed', error: 'theirs' }]);
    expect((await widgetState(api, otherAgent.widgetToken)).body.failed_command).toMatchObject({ request_id: 'f-other' });
    expect((await widgetState(api, agent.widgetToken)).body.failed_command).toEqual(ours);
    // a heartbeat with nothing to ack leaves it as it was
    await h.services.engines.heartbeat(context, { ...READY, acks: [] } as HeartbeatRequest, 'rest');
    expect((await widgetState(api, otherAgent.widgetToken)).body.failed_command).toMatchObject({ request_id: 'f-other' });
  });
  it('fails the commands left for a window as it closes, is replaced or is closed by the operator, and shows the newest: never left queued for a window that will not take them', async () => {
    const member = await createMember(h.services, { accountId: t.accountId, email: 'closing@acme.example', name: 'Closing', departmentId: t.salesId });
    const closing = await readyAgent(api, t, member.email);
    const status = async (id: number) => (await h.services.db.query<{ status: string; error: string | null }>('SELECT status, error FROM widget_commands WHERE id = $1', [id]))[0];
    const sendFocus = async (token: string, requestId: string) => (await command(api, token, { kind: 'focus', request_id: requestId })).body.command_id as number;

    // closed by the agent (the page unloads) on a call, with two commands not yet carried out
    const id = (await requestCall(api, t, { agent: { type: 'email', value: member.email } })).body.request_id as string;
    await api.post('/engine/claim', { request_id: id }, { auth: closing.engineToken });
    await h.clock.advanceSeconds(3);
    const untouched = await queue('f-untouched'); // another agent's, whose window stays open
    const othersBefore = (await widgetState(api, agent.widgetToken)).body;
    const older = await sendFocus(closing.widgetToken, 'f-closing-1');
    const newer = (await command(api, closing.widgetToken, { kind: 'mute', request_id: 'f-closing-2' })).body.command_id as number;
    const before = (await widgetState(api, closing.widgetToken)).body.version as number;
    expect((await api.post('/engine/close', {}, { auth: closing.engineToken })).status).toBe(200);
    expect(await status(older)).toEqual({ status: 'failed', error: WINDOW_CLOSED });
    expect(await status(newer)).toEqual({ status: 'failed', error: WINDOW_CLOSED });
    const after = (await widgetState(api, closing.widgetToken)).body;
    expect(after.version).toBeGreaterThan(before);
    expect(after.failed_command).toEqual({ request_id: 'f-closing-2', kind: 'mute', error: 'command_failed', message: WINDOW_CLOSED, failed_at: Math.floor(h.clock.now() / 1000) });
    // another agent's are not touched
    expect(await status(untouched)).toEqual({ status: 'queued', error: null });
    const othersAfter = (await widgetState(api, agent.widgetToken)).body;
    expect([othersAfter.version, othersAfter.failed_command]).toEqual([othersBefore.version, othersBefore.failed_command]);
    await h.services.calls.hangupByServer(t.integrationId, id);

    // replaced by a window the agent opens again (never while on a call: what is left is a focus)
    const replaced = await readyAgent(api, t, member.email);
    const left = await sendFocus(replaced.widgetToken, 'f-replaced');
    await readyAgent(api, t, member.email);
    expect(await status(left)).toEqual({ status: 'failed', error: WINDOW_CLOSED });

    // closed by the operator with the rest of an integration's windows
    const other = await seedTenant(h.services);
    const closedByOperator = await readyAgent(api, other);
    const pending = await sendFocus(closedByOperator.widgetToken, 'f-operator');
    expect(await closeIntegrationWindows(h.services, other.integrationId)).toBe(1);
    expect(await status(pending)).toEqual({ status: 'failed', error: WINDOW_CLOSED });
  });

  it("fails a focus left for a closing window without showing it (the agent's next window comes up anyway), and, by the reaper, a command recorded for a window just after it closed", async () => {
    const member = await createMember(h.services, { accountId: t.accountId, email: 'racing-close@acme.example', name: 'Racing', departmentId: t.salesId });
    const racing = await readyAgent(api, t, member.email);
    const status = async (id: number) => (await h.services.db.query<{ status: string }>('SELECT status FROM widget_commands WHERE id = $1', [id]))[0]!.status;
    const focus = (await command(api, racing.widgetToken, { kind: 'focus', request_id: 'f-silent' })).body.command_id as number;
    const before = (await widgetState(api, racing.widgetToken)).body.failed_command;
    const oldWindow = await h.services.engines.authenticate(racing.engineToken);
    await readyAgent(api, t, member.email); // Enable calls clicked again: a new window replaces it
    expect(await status(focus)).toBe('failed');
    expect((await widgetState(api, racing.widgetToken)).body.failed_command).toEqual(before);
    // the old window's ack of it, on its way as it closed, comes too late to count or to show
    await h.services.engines.ack(oldWindow, [{ command_id: focus, result: 'done' }]);
    expect(await status(focus)).toBe('failed');
    expect((await widgetState(api, racing.widgetToken)).body.failed_command).toEqual(before);

    // a mute of the agent's call, recorded as its window closed (the closing statement could not see it)
    const next = await readyAgent(api, t, member.email);
    const id = (await requestCall(api, t, { agent: { type: 'email', value: member.email } })).body.request_id as string;
    await api.post('/engine/claim', { request_id: id }, { auth: next.engineToken });
    await h.clock.advanceSeconds(3);
    const mute = (await command(api, next.widgetToken, { kind: 'mute', request_id: 'f-raced' })).body.command_id as number;
    expect(await status(mute)).toBe('queued');
    await h.services.db.query(`UPDATE engines SET state = 'closed', closed_at = $2, close_reason = 'closed' WHERE id = $1`, [next.engineId, h.clock.now()]);
    await h.services.reaper.tick();
    expect(await status(mute)).toBe('failed');
    expect((await widgetState(api, next.widgetToken)).body.failed_command).toMatchObject({ request_id: 'f-raced', kind: 'mute', message: WINDOW_CLOSED });
    await h.services.calls.hangupByServer(t.integrationId, id);

    // a window closed long ago (by a release before this one, its commands left queued) is not swept: its failures would be news to no one
    const old = await readyAgent(api, t, member.email);
    const leftLongAgo = (await command(api, old.widgetToken, { kind: 'focus', request_id: 'f-long-ago' })).body.command_id as number;
    await h.services.db.query(`UPDATE engines SET state = 'closed', closed_at = $2, close_reason = 'closed' WHERE id = $1`, [old.engineId, h.clock.now() - CLOSED_COMMANDS_SWEPT_FOR_MS - 1]);
    await h.services.reaper.tick();
    expect(await status(leftLongAgo)).toBe('queued');
  });

  it("fails only the socket ack that cannot be recorded; the other windows' acks sharing its statement are recorded", async () => {
    const other = await readyAgent(api, t, (await createMember(h.services, { accountId: t.accountId, email: 'ack-neighbour@acme.example', name: 'Neighbour', departmentId: t.salesId })).email);
    const poisoned = await queue('f-poisoned');
    const sent = await command(api, other.widgetToken, { kind: 'focus', request_id: 'f-neighbour' });
    const neighbour = sent.body.command_id as number;
    const [mine, theirs] = await Promise.all([h.services.engines.authenticate(agent.engineToken), h.services.engines.authenticate(other.engineToken)]);
    // the store refuses any statement that records the poisoned command's ack (a row locked past the statement timeout, say)
    const query = h.services.db.query.bind(h.services.db);
    const names = (params: readonly unknown[] | undefined) => (params ?? []).flat().some((value) => Number(value) === poisoned);
    const statements = vi.spyOn(h.services.db, 'query').mockImplementation(async (text: string, params?: readonly unknown[]) => {
      if (text.startsWith('UPDATE widget_commands c SET acks') && names(params)) throw new Error('canceling statement due to statement timeout');
      return query(text, params);
    });
    try {
      const acked = await Promise.allSettled([
        h.services.engines.ack(mine, [{ command_id: poisoned, result: 'done' }]),
        h.services.engines.ack(theirs, [{ command_id: neighbour, result: 'done' }]),
      ]);
      expect(acked.map((result) => result.status)).toEqual(['rejected', 'fulfilled']);
      // they did share one statement first
      expect(statements.mock.calls.filter(([text]) => String(text).startsWith('UPDATE widget_commands c SET acks')).length).toBe(3);
    } finally {
      statements.mockRestore();
    }
    const [row] = await h.services.db.query<{ status: string }>('SELECT status FROM widget_commands WHERE id = $1', [neighbour]);
    expect(row!.status).toBe('done');
  });
});
