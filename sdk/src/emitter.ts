/** A tiny typed event emitter: listeners' errors are rethrown asynchronously, never into the SDK. */
export class Emitter<Events extends object> {
  private readonly listeners = new Map<keyof Events, Set<(payload: never) => void>>();

  on<E extends keyof Events>(event: E, fn: (payload: Events[E]) => void): this {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(fn as (payload: never) => void);
    return this;
  }

  off<E extends keyof Events>(event: E, fn: (payload: Events[E]) => void): this {
    this.listeners.get(event)?.delete(fn as (payload: never) => void);
    return this;
  }

  protected emit<E extends keyof Events>(event: E, payload: Events[E]): void {
    for (const fn of [...(this.listeners.get(event) ?? [])]) {
      try {
        (fn as (payload: Events[E]) => void)(payload);
      } catch (error) {
        setTimeout(() => {
          throw error;
        });
      }
    }
  }
}
