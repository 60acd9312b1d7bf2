/**
 * The consent question's "yes" takes no click until the question has been on screen for
 * CONSENT_ARM_MS with the window in front: the page that opened the window decides where the
 * popup appears and when a ticket reaches it, so it could make the question appear under a click
 * the user meant for that page ("click twice"). The same defence browsers give their own
 * permission prompts. Leaving the window (blur, hidden) disarms it; coming back arms it afresh.
 */
export const CONSENT_ARM_MS = 1000;

export interface ConsentGuardDeps {
  win: Pick<Window, 'addEventListener' | 'removeEventListener' | 'setTimeout' | 'clearTimeout'>;
  doc: Pick<Document, 'addEventListener' | 'removeEventListener' | 'visibilityState'>;
}

export class ConsentGuard {
  #timer: number | undefined;
  #asking = false;

  constructor(
    private readonly button: HTMLButtonElement,
    private readonly deps: ConsentGuardDeps,
  ) {
    const disarm = () => {
      if (!this.#asking) return;
      this.#cancel();
      this.button.disabled = true;
    };
    const rearm = () => {
      if (this.#asking && this.deps.doc.visibilityState !== 'hidden') this.#arm();
    };
    deps.win.addEventListener('blur', disarm);
    deps.win.addEventListener('focus', rearm);
    deps.doc.addEventListener('visibilitychange', () => (deps.doc.visibilityState === 'hidden' ? disarm() : rearm()));
  }

  /** The question is on screen (true) or gone (false). */
  asking(asking: boolean): void {
    if (asking === this.#asking) return;
    this.#asking = asking;
    if (asking) return this.#arm();
    this.#cancel();
    this.button.disabled = false;
  }

  #arm(): void {
    this.#cancel();
    this.button.disabled = true;
    this.#timer = this.deps.win.setTimeout(() => {
      this.#timer = undefined;
      this.button.disabled = false;
    }, CONSENT_ARM_MS);
  }

  #cancel(): void {
    if (this.#timer !== undefined) this.deps.win.clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
