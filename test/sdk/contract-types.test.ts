/**
 * The SDK declares the contract's resources as plain interfaces (no zod in the bundle or its type
 * declarations). These checks keep them identical to shared/. expectTypeOf does nothing at run
 * time: the type-level ones are enforced by the typecheck, which `npm test` runs before the suites.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import type { PushedState, SocketEnd } from '../../shared/events.js';
import type { ErrorEnvelope } from '../../shared/errors.js';
import { LIVE_STATUSES as SERVER_LIVE } from '../../api/domain/calls/checks.js';
import { CALL_STATUSES } from '../../shared/schemas/resources.js';
import { COMMAND_KINDS, type FailedCommand, type LaunchTicket } from '../../shared/schemas/widget-api.js';
import type * as S from '../../shared/types.js';
import * as C from '../../sdk/src/contract.js';

describe('sdk/src/contract.ts', () => {
  it('matches the shared resource types exactly', () => {
    expectTypeOf<C.Call>().toEqualTypeOf<S.Call>();
    expectTypeOf<C.CallStatus>().toEqualTypeOf<S.CallStatus>();
    expectTypeOf<C.Display>().toEqualTypeOf<S.Display>();
    expectTypeOf<C.Engine>().toEqualTypeOf<S.Engine>();
    expectTypeOf<C.Policy>().toEqualTypeOf<S.Policy>();
    expectTypeOf<C.WidgetAgent>().toEqualTypeOf<S.WidgetAgent>();
    expectTypeOf<C.Realtime>().toEqualTypeOf<S.Realtime>();
    expectTypeOf<C.Session>().toEqualTypeOf<S.Session>();
    expectTypeOf<C.Command>().toEqualTypeOf<S.Command>();
    expectTypeOf<C.CommandKind>().toEqualTypeOf<S.CommandKind>();
    expectTypeOf<C.CommandResult>().toEqualTypeOf<S.CommandResult>();
    expectTypeOf<C.LaunchTicket>().toEqualTypeOf<z.infer<typeof LaunchTicket>>();
    expectTypeOf<C.FailedCommand>().toEqualTypeOf<z.infer<typeof FailedCommand>>();
  });

  it('reads both polled and pushed states', () => {
    // PushedState is an intersection, which expect-type's equality does not flatten: check both ways.
    expectTypeOf<C.WidgetState>().toExtend<PushedState>();
    expectTypeOf<PushedState>().toExtend<C.WidgetState>();
    expectTypeOf<S.WidgetState>().toExtend<C.WidgetState>();
  });

  it('accepts every ending and error the server sends', () => {
    expectTypeOf<SocketEnd>().toExtend<C.SocketEnd>();
    expectTypeOf<ErrorEnvelope>().toExtend<C.ErrorEnvelope>();
  });

  it('lists the same values as the server', () => {
    expect([...C.LIVE_STATUSES].sort()).toEqual([...SERVER_LIVE].sort());
    expect(CALL_STATUSES.length).toBe(13);
    expect(COMMAND_KINDS.length).toBe(8);
  });
});
