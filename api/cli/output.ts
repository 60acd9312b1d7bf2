/** CLI output: JSON with --json, otherwise short human lines. Collected, so the admin bridge can return it. */
export class Output {
  readonly lines: string[] = [];
  readonly errors: string[] = [];
  constructor(readonly json: boolean) {}

  /** Print a result: the object as JSON, or the human text. */
  result(value: unknown, human: string): void {
    this.lines.push(this.json ? JSON.stringify(value, null, 2) : human);
  }

  /** A warning: to standard error, the command still succeeds. */
  warn(message: string): void {
    this.errors.push(this.json ? JSON.stringify({ warning: message }) : `warning: ${message}`);
  }

  error(message: string): void {
    this.errors.push(this.json ? JSON.stringify({ ok: false, error: message }) : `error: ${message}`);
  }
}
