/**
 * The engine service: everything a call window does (spec section 4, "Engine endpoints"), for the
 * REST routes and the gateway alike. For simulated engines it also plays the voice SDK's part
 * against the simulator: connecting after a claim, answering and sending digits when the window
 * acks those commands.
 */
import { C2CError } from '../../../shared/errors.js';
import { engineIdentity } from '../../../shared/prefixes.js';
import type { HeartbeatRequest } from '../../../shared/schemas/engine-api.js';
import type { Bus } from '../../bus/index.js';
import { systemClock, type Clock } from '../../clock.js';
import type { Config } from '../../config.js';
import { loadProviderAccount, type Providers } from '../../providers/index.js';
import { coalesce } from '../../store/coalesce.js';
import type { Db } from '../../store/index.js';
import { Changes } from '../changes.js';
import { LIVE_STATUS_LIST, ON_ENGINE_STATUS_LIST } from '../calls/checks.js';
import { claimIntent } from '../calls/claim.js';
import { hangupCall } from '../calls/hangup.js';
import type { Commands } from '../commands/service.js';
import type { Directory } from '../directory.js';
import type { CallRow } from '../views.js';
import { createEngineAuth, type EngineContext } from './auth.js';
import { applyAcks, type EngineAcks, type FirstAck } from './acks.js';
import { recordFailedCommands } from './failed-commands.js';
import { markDroppedOffline, type Drop } from './dropped.js';
import { createHeartbeats, type HeartbeatVia } from './heartbeat.js';
import { pairEngine } from './pair.js';
import { failCommandsOfClosedWindows } from './closed-commands.js';

export interface EnginesDeps {
  db: Db;
  bus: Bus;
  clock: Clock;
  config: Config;
  providers: Providers;
  commands: Commands;
  directory: Directory;
  log?: (message: string, error?: unknown) => void;
}

/**
 * How long a socket ack waits for others to share its statement. Nothing the user sees waits on an
 * ack being recorded (the window already did the command; it keeps the result until the reply
 * confirms the write), and at a busy node's hundreds of acks a second this turns one UPDATE per
 * ack into one per several. Real time, not the domain's clock: it is batching, not a rule.
 */
const ACK_GATHER_MS = 10;

/** Voice tokens live an hour; the window fetches a new one before that. */
const VOICE_TOKEN_TTL_SECONDS = 3600;

export function createEngines(deps: EnginesDeps) {
  const { db, bus, clock, providers } = deps;

  // One statement, so a batch that fails changed nothing: each ack is then tried alone, and one
  // that cannot be recorded (its row locked past the statement timeout) fails only its own window.
  const ackTogether = coalesce((reports: EngineAcks[]) => applyAcks(db, reports, clock.now()), { gather: { clock: systemClock, ms: ACK_GATHER_MS }, isolate: true });
  const engineHeartbeat = createHeartbeats(deps);
  // The drops of one moment (a network cut, a load balancer's restart) share a statement.
  const dropTogether = coalesce(async (drops: Drop[]) => {
    (await markDroppedOffline(db, drops)).publish(bus);
    return drops.map(() => undefined);
  });

  /**
   * SIMULATED_ENGINES=refuse (docs/simulated-provider.md): no call a carrier did not carry is
   * billed here. A simulated pairing is refused (the ticket unspent), and so is every request and
   * socket of a simulated engine paired before the operator set it, as a closed window's: it goes
   * offline, and its agent with it, so no call waits on it either.
   */
  const refusesSimulated = () => deps.config.simulatedEngines === 'refuse';
  const REFUSED_SIMULATED = 'This service takes no simulated engines (its operator set SIMULATED_ENGINES=refuse): pair a real call window.';
  const authenticateEngine = createEngineAuth(db, bus, clock, deps.directory);
  const providerFor = (context: EngineContext) => (context.engine.simulated ? providers.simulator : providers.configured);

  /** What the window's voice device does once it acked a command: only simulated devices need us. */
  async function deviceEffects(context: EngineContext, acks: FirstAck[]): Promise<void> {
    if (!context.engine.simulated) return;
    for (const ack of acks) {
      if (!ack.done || !ack.call_id) continue;
      const [call] = await db.query<CallRow>('SELECT * FROM call_intents WHERE id = $1', [ack.call_id]);
      if (!call?.provider_call_sid) continue;
      if (ack.kind === 'answer') await providers.simulator.answer(call.provider_call_sid);
      if (ack.kind === 'dtmf' && ack.digits) providers.simulator.sendDigits(call.provider_call_sid, ack.digits);
    }
  }

  /** What follows a window's first results of commands: its widgets hear of failures, and a simulated device acts. */
  async function acked(context: EngineContext, acks: FirstAck[]): Promise<void> {
    // The acks are recorded already: a window resending them would not make them first acks again,
    // so a failure here must not fail the request (nor stop the device effects). The widget then
    // waits its effect out, as it did before it could hear of failures.
    await recordFailedCommands(db, clock, context.engine, acks).then(
      (changes) => changes.publish(bus),
      (error: unknown) => deps.log?.('recording a command the window could not carry out failed', error),
    );
    await deviceEffects(context, acks);
  }

  const service = {
    async authenticate(token: string | undefined): Promise<EngineContext> {
      const context = await authenticateEngine(token);
      if (context.engine.simulated && refusesSimulated()) throw new C2CError('unauthorized', REFUSED_SIMULATED);
      return context;
    },

    async pair(input: { ticket: string; simulated: boolean; client: 'window' | 'extension'; attempt?: string | undefined }) {
      // refused before the ticket is spent: a real window can still pair with it
      if (input.simulated && refusesSimulated()) throw new C2CError('invalid_request', REFUSED_SIMULATED);
      const pairing = await pairEngine(db, clock, input);
      pairing.changes.publish(bus);
      return pairing;
    },

    async voiceToken(context: EngineContext) {
      const account = await loadProviderAccount(db, context.integration.account_id);
      const identity = engineIdentity(context.engine.id);
      const provider = providerFor(context);
      const token = await provider.accessToken(account!, identity, VOICE_TOKEN_TTL_SECONDS);
      const changes = new Changes();
      await db.tx(async (sql) => {
        const rows = await sql.query('UPDATE engines SET registered = true WHERE id = $1 AND NOT registered RETURNING id', [context.engine.id]);
        if (rows.length > 0) await changes.touchAgent(sql, context.engine.integration_id, context.engine.member_id);
      });
      changes.publish(bus);
      return { provider: provider.name, token: token.token, identity, expiresAt: token.expiresAt };
    },

    async heartbeat(context: EngineContext, report: HeartbeatRequest, via: HeartbeatVia) {
      const result = await engineHeartbeat(context, report, via);
      result.changes.publish(bus);
      if (result.firstAcks.length > 0) service.onAcks?.('heartbeat', result.firstAcks.length);
      await acked(context, result.firstAcks);
      return result;
    },

    /** Results of commands the window received by push (the socket's `ack` event). */
    async ack(context: EngineContext, acks: HeartbeatRequest['acks']) {
      const first = await ackTogether({ engineId: context.engine.id, acks });
      if (first.length > 0) service.onAcks?.('socket', first.length);
      await acked(context, first);
    },

    async claim(context: EngineContext, requestId: string) {
      const provider = providerFor(context);
      const { call, changes, fresh } = await claimIntent(db, clock, context, requestId, provider.name);
      changes.publish(bus);
      const params = { To: call.id, Biz: call.account_id, CallerId: call.caller_id ?? '' };
      if (context.engine.simulated && fresh) {
        // A simulated engine has no voice SDK: the simulator connects for it, as Device.connect would
        // (once: a repeated claim finds the first connect under way).
        const account = await loadProviderAccount(db, call.account_id);
        await providers.simulator.connect(account!, engineIdentity(context.engine.id), params);
      }
      const [current] = await db.query<CallRow>('SELECT * FROM call_intents WHERE id = $1', [call.id]);
      return { call: current!, params };
    },

    /** The window's own hang-up button: its live call (or the one named) ends through the provider. */
    async hangup(context: EngineContext, callId: string | undefined): Promise<CallRow | null> {
      const [call] = await db.query<CallRow>(
        `SELECT * FROM call_intents WHERE integration_id = $1 AND member_id = $2 AND status IN (${LIVE_STATUS_LIST}) AND ended_at IS NULL
           AND ($3::text IS NULL OR id = $3) ORDER BY (engine_id = $4) DESC NULLS LAST, created_at DESC LIMIT 1`,
        [context.engine.integration_id, context.engine.member_id, callId ?? null, context.engine.id],
      );
      if (!call) return null;
      const ended = await hangupCall(deps, call.id, 'hangup', { byAgent: true });
      ended.changes.publish(bus);
      return ended.call;
    },

    /**
     * The window's own Answer button, for an incoming call ringing on it (the agent need not have
     * the CRM open). A real device answers through the provider, which reports the answer; a
     * simulated one has the simulator answer, as for the widget's acked `answer` command.
     */
    async answer(context: EngineContext, callId: string): Promise<CallRow> {
      const [call] = await db.query<CallRow>(
        `SELECT * FROM call_intents WHERE id = $1 AND integration_id = $2 AND member_id = $3 AND engine_id = $4 AND direction = 'inbound'`,
        [callId, context.engine.integration_id, context.engine.member_id, context.engine.id],
      );
      // connected already: answered (a real device's answer reported by the provider first, a second click)
      if (call?.status === 'connected') return call;
      if (!call || call.status !== 'incoming') throw new C2CError('invalid_state', 'No incoming call of this window rings with this call_id.');
      // a real device's answer reaches the service from the provider: the call as it is
      if (!context.engine.simulated || !call.provider_call_sid) return call;
      await providers.simulator.answer(call.provider_call_sid);
      const [answered] = await db.query<CallRow>('SELECT * FROM call_intents WHERE id = $1', [call.id]);
      return answered!;
    },

    /** The window is closing: it no longer holds its calls (they are orphaned, not ended). */
    async close(context: EngineContext, reason: string | undefined) {
      const changes = new Changes();
      await db.tx(async (sql) => {
        const closed = await sql.query(
          `UPDATE engines SET state = 'closed', closed_at = $2, close_reason = $3, version = version + 1 WHERE id = $1 AND state <> 'closed' RETURNING id`,
          [context.engine.id, clock.now(), reason ?? 'closed'],
        );
        if (closed.length === 0) return;
        await sql.query(`UPDATE call_intents SET orphaned = true, orphaned_at = coalesce(orphaned_at, $2) WHERE engine_id = $1 AND status IN (${ON_ENGINE_STATUS_LIST})`, [
          context.engine.id,
          clock.now(),
        ]);
        await failCommandsOfClosedWindows(sql, changes, clock.now(), [context.engine.id]);
        await changes.touchAgent(sql, context.engine.integration_id, context.engine.member_id);
        // the window's own words stay in close_reason; its sockets are told only that it closed
        changes.engineClosed(context.engine.id, 'closed');
      });
      changes.publish(bus);
    },

    /** The engine's socket dropped at `at` and it has not been heard from since: offline, unless on a call (dropped.ts). */
    markDroppedOffline: (drop: Drop): Promise<void> => dropTogether(drop),

    /** Called with the number of commands acked for the first time, by how the acks came (a heartbeat, or the socket's `ack` event). */
    onAcks: undefined as ((via: 'heartbeat' | 'socket', count: number) => void) | undefined,
  };
  return service;
}

export type Engines = ReturnType<typeof createEngines>;
