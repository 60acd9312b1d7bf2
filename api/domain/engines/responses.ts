/** The heartbeat's answer body, shared by POST /engine/heartbeat and the socket's heartbeat event. */
import { LIMITS } from '../../../shared/limits.js';
import type { HeartbeatResponse } from '../../../shared/schemas/engine-api.js';
import { seconds } from '../../clock.js';
import { toCall, toEngine } from '../views.js';
import type { EngineContext } from './auth.js';
import type { HeartbeatResult } from './heartbeat.js';

export function heartbeatBody(result: HeartbeatResult, context: EngineContext, nowMs: number): HeartbeatResponse {
  return {
    ok: true,
    engine: toEngine(result.engine, nowMs),
    commands: result.commands,
    dial_requests: result.dialRequests,
    call: result.call ? toCall(result.call, nowMs) : null,
    heartbeat_ms: LIMITS.heartbeatMs,
    server_time: seconds(nowMs),
    controls: context.agent.effective.policy.controls,
    inbound: context.agent.effective.policy.inbound,
  };
}
