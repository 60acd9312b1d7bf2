/**
 * An operator step (every `c2c` command but `serve`): run inside the server for this data directory
 * when one is running (its admin bridge), else against the store directly, as a short-lived node.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ConfigError, type Config } from '../config.js';
import { closeServices, openServices } from '../serve.js';
import type { Services } from '../services.js';
import { BridgeRefused, CHECK_FIRST, findRunningServer, forwardCommand, OUTCOME_UNKNOWN, runCommand, type CliResult } from './admin-bridge.js';
import { readAttachedFiles, type AttachedFiles } from './files.js';
import { errorLine } from './output.js';
import type { ServiceUse } from './program.js';

export async function operate(argv: string[], config: Config): Promise<CliResult> {
  const json = argv.includes('--json');
  let files: AttachedFiles;
  try {
    files = readAttachedFiles(argv);
  } catch (error) {
    return { code: 1, stdout: [], stderr: [errorLine(json, (error as Error).message)] };
  }
  const running = findRunningServer(config.dataDir);
  if (running) {
    try {
      return await forwardCommand(running, argv, files);
    } catch (error) {
      const admin = join(config.dataDir, 'admin.json');
      const code = (error as { cause?: { code?: string } }).cause?.code;
      // Refused before it ran, the command can be run again; otherwise it may have run (a top-up twice would credit twice).
      const notTaken = code === 'ECONNREFUSED' || error instanceof BridgeRefused;
      const server = `the server for ${resolve(config.dataDir)} (pid ${running.pid})`;
      return {
        // a script may run again what was not taken (1), never what may have run (3)
        code: notTaken ? 1 : OUTCOME_UNKNOWN,
        stdout: [],
        stderr: [
          notTaken
            ? errorLine(json, `${server} did not take the command (${code ?? (error as Error).message}): nothing was changed. If it is starting or stopping, try again; if process ${running.pid} is not that server, remove ${admin}.`, 'service_unavailable')
            : errorLine(json, `the answer of ${server} was lost (${code ?? (error as Error).message}): the command may or may not have run. ${CHECK_FIRST}`, 'outcome_unknown'),
        ],
      };
    }
  }
  let services: Services | undefined;
  const opened = async (use?: ServiceUse) => {
    if (use === 'in-node') {
      throw new ConfigError(
        `no server running for C2C_DATA_DIR (${resolve(config.dataDir)}) to run this in: a simulated incoming call rings in a running node ` +
          "(its ringing leg lives there; made here, it would end with this command and could not be answered). Start the server (npm start) and run c2c with its C2C_DATA_DIR, or use POST /simulated/inbound-calls.",
      );
    }
    assertStoreHere(config, use);
    if (!services) {
      services = await openServices(config);
      // what the states it pushes say of push, as an API node's do
      services.realtime.available = config.gatewayConfigured;
      // A running node pushes its own changes to the sockets of every node: so does this step, which
      // is one for its while (a new policy, widget defaults, an agent's override would otherwise
      // reach no open widget until that agent's next change).
      stopPushing = services.pusher.start();
    }
    return services;
  };
  let stopPushing: (() => void) | undefined;
  let pushed = true;
  let result: CliResult;
  try {
    result = await runCommand(argv, opened, files);
  } finally {
    if (services) {
      pushed = await services.pusher.settled();
      stopPushing?.();
      await closeServices(services);
    }
  }
  if (pushed) return result;
  const warning = "some agents' open widgets could not be sent their new state (the store did not answer in time): they show it on the agent's next change or when they reconnect";
  return { ...result, stderr: [...result.stderr, json ? JSON.stringify({ warning }) : `warning: ${warning}`] };
}

/**
 * With no server running for the data directory, an operator step opens its store itself: it must
 * be there already. A mistyped or missing C2C_DATA_DIR would otherwise make a new, empty store,
 * and the step would "succeed" on it while the real service went on unchanged.
 *
 * On a shared PostgreSQL, nodes hear of a change on the bus, and keep what they cached (the platform
 * switch, integrations, tokens' checks, origins) until they do. Without REDIS_URL the step's bus is
 * in-process: no node would hear, and a platform disabled "successfully" would go on serving. So a
 * step that changes anything runs only with Redis, or when the operator says no node is running on
 * the database; one that only reads (a list, a show, the platform's status) runs anyway.
 */
function assertStoreHere(config: Config, use?: 'reading', env: NodeJS.ProcessEnv = process.env): void {
  if (config.databaseUrl) {
    if (use === 'reading' || config.redisUrl || env[NO_NODES_RUNNING] === '1') return;
    throw new ConfigError(
      `no server running for C2C_DATA_DIR (${resolve(config.dataDir)}) to run this in, and without REDIS_URL a change made on DATABASE_URL directly reaches no running node ` +
        `(they keep the old settings until they restart). Run c2c with the server's C2C_DATA_DIR, or with REDIS_URL as the nodes have it; ` +
        `if no node is running on this database, set ${NO_NODES_RUNNING}=1.`,
    );
  }
  if (existsSync(join(config.dataDir, 'pglite'))) return;
  throw new ConfigError(
    `no store in C2C_DATA_DIR (${resolve(config.dataDir)}) and no server running for it. ` +
      "Run c2c with the server's C2C_DATA_DIR (or DATABASE_URL), or start the server there first (npm start).",
  );
}

/** The operator's word that no node runs on DATABASE_URL, for a step run there without Redis (assertStoreHere). */
const NO_NODES_RUNNING = 'C2C_NO_NODES_RUNNING';
