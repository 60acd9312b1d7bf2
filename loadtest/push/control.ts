/**
 * The control channel of the baseline servers (raw uWS, Socket.IO on Node's http server): requests
 * from the bench over IPC, such as "broadcast this payload R times a second for S seconds".
 */
export interface ControlRequest {
  type: 'ctl';
  id: number;
  op?: unknown;
  [key: string]: unknown;
}

export interface ControlReply {
  type: 'ctl';
  id: number;
  result?: unknown;
  error?: string;
}

export interface BroadcastResult {
  pushes: number;
  /** sockets in the room when the first push left */
  members: number;
  ms: number;
}

/** Answers control requests with the handler's result (or its error). */
export function onControl(handler: (request: ControlRequest) => Promise<unknown>): void {
  process.on('message', (message: unknown) => {
    const request = message as ControlRequest;
    if (request?.type !== 'ctl') return;
    handler(request).then(
      (result) => process.send?.({ type: 'ctl', id: request.id, result } satisfies ControlReply),
      (error: unknown) => process.send?.({ type: 'ctl', id: request.id, error: String((error as Error)?.stack ?? error) } satisfies ControlReply),
    );
  });
}

/**
 * Calls push() `rate` times a second for `seconds`: one timer per push, set for its due time (and
 * catching up after a late one), so pacing costs the server next to nothing.
 */
export function paced(rate: number, seconds: number, push: () => void): Promise<{ pushes: number; ms: number }> {
  const total = Math.round(rate * seconds);
  const start = performance.now();
  let done = 0;
  return new Promise((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
      while (done < due) {
        push();
        done += 1;
      }
      if (done >= total) {
        resolve({ pushes: done, ms: performance.now() - start });
        return;
      }
      setTimeout(tick, Math.max(0, start + (done * 1000) / rate - performance.now()));
    };
    tick();
  });
}
