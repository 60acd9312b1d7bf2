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

  /** A refusal or failure; with --json the API's envelope, `code` from the error catalogue. */
  error(message: string, code = 'invalid_request'): void {
    this.errors.push(errorLine(this.json, message, code));
  }
}

/** One line of standard error for a command that failed: `error: …`, or with --json `{"ok":false,"error":<code>,"message":…}`. */
export function errorLine(json: boolean, message: string, code = 'invalid_request'): string {
  return json ? JSON.stringify({ ok: false, error: code, message }) : `error: ${message}`;
}
