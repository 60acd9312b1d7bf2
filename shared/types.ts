/** Plain resource types, for code that must not pull zod into a bundle (the SDK, the window). */
export type {
  AgentRef,
  Call,
  CallDirection,
  CallStatus,
  Control,
  Display,
  Engine,
  EngineClient,
  EngineState,
  IdentifierMode,
  NumberVisibility,
  Policy,
  Realtime,
  WidgetAgent,
  PolicyWidget,
  WidgetDefaults,
  WindowMode,
} from './schemas/resources.js';
export type { CallRequest, Session, SessionRequest } from './schemas/server-api.js';
export type { Command, CommandKind, CommandResult, CommandStatus, WidgetState } from './schemas/widget-api.js';
