/**
 * The `c2c` entry point. `c2c serve` runs a node; every other command is an operator step, run
 * inside the server for this data directory when one is running, else against the store directly.
 */
import { Command, Option } from 'commander';
import { ConfigError, loadConfig } from '../config.js';
import { startNode, type Role, type RunningNode } from '../serve.js';
import { operate } from './operate.js';
import { errorLine } from './output.js';
import { stopSignal } from './signals.js';

async function serve(argv: string[]): Promise<void> {
  const command = new Command('c2c serve')
    .description('run the service: the API, the real-time gateway, or both (the default); --demo seeds the demo tenant')
    .addOption(new Option('--role <role>', 'which part of the service this node runs').choices(['api', 'gateway', 'all']).default('all'))
    .option('--demo', 'seed the demo tenant and print its credentials')
    .parse(argv, { from: 'user' });
  const options = command.opts<{ role: Role; demo?: boolean }>();
  const config = loadConfig();
  let node: RunningNode | undefined;
  const log = (message: string) => (node?.app ? node.app.log.info(message) : console.log(JSON.stringify({ level: 30, time: Date.now(), msg: message })));
  const stop = stopSignal(log);
  node = await startNode(config, { role: options.role, demo: options.demo || config.demo });
  if (node.url) log(`API on ${node.url}/api/v1/click2call (store: ${node.services.db.driver}, bus: ${node.services.bus.driver})`);
  if (node.gateway) log(`gateway on port ${node.gateway.port} (uWebSockets.js ${node.gateway.native ? 'native' : 'FALLBACK'}, bus: ${node.services.bus.driver})`);
  await stop.received;
  stop.closing();
  await node.close().then(
    () => process.exit(0),
    (error: unknown) => {
      log(`the shutdown failed: ${(error as Error).message}`);
      process.exit(1);
    },
  );
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === 'serve') return serve(argv.slice(1));
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    // with --json, a bad environment is a refusal like the others: the envelope
    if (!(error instanceof ConfigError) || !argv.includes('--json')) throw error;
    process.stderr.write(`${errorLine(true, error.message)}\n`);
    process.exit(1);
  }
  const result = await operate(argv, config);
  for (const line of result.stdout) process.stdout.write(`${line}\n`);
  for (const line of result.stderr) process.stderr.write(`${line}\n`);
  process.exitCode = result.code;
}

main().catch((error: unknown) => {
  // A ConfigError is the operator's to fix and says how, in one line; its driver's stack (the
  // cause) only at debug level. Anything else is a defect: its stack.
  const debug = ['debug', 'trace'].includes(process.env.LOG_LEVEL ?? '');
  const cause = error instanceof ConfigError && debug && error.cause instanceof Error ? `\n${error.cause.stack}` : '';
  process.stderr.write(`${error instanceof ConfigError ? `c2c: ${error.message}${cause}` : `c2c: ${(error as Error).stack ?? String(error)}`}\n`);
  process.exit(1);
});
