/**
 * The call timer, from the server's numbers: the server says how long the call had been up when
 * it answered (server_time − answered_at); the window adds the local time since it received that
 * answer. The local clock's offset from the server's never enters the sum.
 */

export interface TimedCall {
  answered_at: number | null;
  ended_at: number | null;
  server_time: number;
  duration: number;
}

/** Whole seconds the call has been up at local time `nowMs`, given it was received at `receivedAtMs`. */
export function elapsedSeconds(call: TimedCall, receivedAtMs: number, nowMs: number): number | null {
  if (call.answered_at === null) return null;
  if (call.ended_at !== null) return call.duration;
  const atReceipt = Math.max(0, call.server_time - call.answered_at);
  return atReceipt + Math.max(0, Math.floor((nowMs - receivedAtMs) / 1000));
}

/** 0:07, 12:34, 1:02:03 */
export function formatElapsed(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const hours = Math.floor(s / 3600);
  const minutes = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, '0');
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, '0')}:${rest}` : `${minutes}:${rest}`;
}
