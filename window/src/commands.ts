/**
 * The command runner: commands reach the window by push (socket `work`) and in heartbeat answers,
 * and the server hands each one over again until it is acked, so the same command may arrive many
 * times. The runner carries out each command_id once (a second delivery while the first is still
 * running waits for it), answers every delivery with the command's one result, and keeps results
 * the server has not confirmed so the next heartbeat carries them: exactly-once effect over
 * at-least-once delivery.
 */
import type { CommandAck, EngineCommand } from './api.js';
import { errorText } from './messages.js';

/** Carries out one command; a throw makes the result `failed` with the error's text. */
export type Executor = (command: EngineCommand) => Promise<void> | void;

/** The longest error text a CommandAck may carry. */
const ERROR_MAX = 200;
/** The most acks one heartbeat may carry. */
export const ACKS_PER_HEARTBEAT = 100;

export class CommandRunner {
  readonly #execute: Executor;
  /** every command_id ever started, with its (eventual) result */
  readonly #results = new Map<number, Promise<CommandAck>>();
  /** results the server has not confirmed yet, by command_id */
  readonly #unconfirmed = new Map<number, CommandAck>();

  constructor(execute: Executor) {
    this.#execute = execute;
  }

  /** True once this command_id was started (whatever its result). */
  has(commandId: number): boolean {
    return this.#results.has(commandId);
  }

  /**
   * Carries out the commands of one delivery that were never started, in order, and resolves
   * with an ack for every command of the delivery (new or already done).
   */
  async deliver(commands: readonly EngineCommand[]): Promise<{ acks: CommandAck[]; fresh: number }> {
    const acks: CommandAck[] = [];
    let fresh = 0;
    for (const command of commands) {
      let result = this.#results.get(command.command_id);
      if (!result) {
        fresh += 1;
        result = this.#run(command);
        this.#results.set(command.command_id, result);
      }
      const ack = await result;
      // Delivered again: the server lacks this ack, so the next heartbeat carries it too.
      this.#unconfirmed.set(ack.command_id, ack);
      acks.push(ack);
    }
    return { acks, fresh };
  }

  /** Results to report in the next heartbeat. */
  pendingAcks(): CommandAck[] {
    return [...this.#unconfirmed.values()].slice(0, ACKS_PER_HEARTBEAT);
  }

  /** The server has these results (a heartbeat answered 200, or the socket `ack` was answered ok). */
  confirm(acks: readonly CommandAck[]): void {
    for (const ack of acks) this.#unconfirmed.delete(ack.command_id);
  }

  async #run(command: EngineCommand): Promise<CommandAck> {
    try {
      await this.#execute(command);
      return { command_id: command.command_id, result: 'done' };
    } catch (error) {
      const text = errorText(error, 'The command could not be carried out.');
      return { command_id: command.command_id, result: 'failed', error: text.slice(0, ERROR_MAX) };
    }
  }
}
