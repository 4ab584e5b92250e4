import { Command, CommanderError, type Option } from 'commander';
import { createCliContext } from './cli-context.js';
import {
  EXIT_USAGE,
  type Failure,
  ReportedFailure,
  USAGE_CODE,
  describeFailure,
  failureJson,
  failureLines,
} from './cli-errors.js';
import { registerArchive } from './commands/archive.js';
import { registerBench } from './commands/bench.js';
import { registerInspect } from './commands/inspect.js';
import { registerPredict } from './commands/predict.js';
import { registerProfile } from './commands/profile.js';
import { registerServe } from './commands/serve.js';
import { CLI_VERSION } from './version.js';

/** Runs the `kiln` command line and returns its exit code. */
export async function runKiln(argv: readonly string[]): Promise<number> {
  const verbose = argv.includes('--verbose');
  const json = argv.includes('--json');
  const cli = createCliContext({ verbose, json });
  const program = new Command('kiln')
    .description('Serve and run deep-learning models from Node.js')
    .version(CLI_VERSION)
    .option('--verbose', 'print stack traces and debug logs')
    .option('--json', 'machine-readable output, errors included')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    // Under --json commander's own text stays unwritten: its errors are reported below as JSON.
    .configureOutput({ writeErr: (s) => (json ? undefined : process.stderr.write(s)) });
  registerServe(program, cli);
  registerPredict(program, cli);
  registerInspect(program, cli);
  registerArchive(program, cli);
  registerProfile(program, cli);
  registerBench(program, cli);
  for (const command of program.commands) command.exitOverride();
  checkRequiredOptionsLast(program);
  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return 0;
      if (json) cli.err(failureJson(commanderFailure(error)));
      return EXIT_USAGE;
    }
    if (error instanceof ReportedFailure) return error.exitCode;
    const failure = describeFailure(error, verbose);
    if (json) cli.err(failureJson(failure));
    else for (const line of failureLines(failure)) cli.err(line);
    return failure.exitCode;
  }
}

/** A command line commander refused, as the failure --json reports. */
function commanderFailure(error: CommanderError): Failure {
  return {
    exitCode: EXIT_USAGE,
    code: USAGE_CODE,
    // Commander's message for a missing command is a marker, not a sentence.
    message:
      error.code === 'commander.help'
        ? 'name a command: serve, predict, inspect, archive, profile or bench'
        : error.message.replace(/^error: /, ''),
    hint: 'run with --help for usage',
  };
}

/**
 * Commander checks required options before unknown ones, so `kiln predict --bogus` would
 * complain about the missing -m instead of the flag that is wrong. The required options are
 * checked here instead, after commander has refused unknown options.
 */
function checkRequiredOptionsLast(program: Command): void {
  const required = new Map<Command, Option[]>();
  for (const command of program.commands) {
    const options = command.options.filter((option) => option.mandatory);
    for (const option of options) option.mandatory = false;
    required.set(command, options);
  }
  program.hook('preAction', (_program, command) => {
    for (const option of required.get(command) ?? []) {
      if (command.getOptionValue(option.attributeName()) === undefined) {
        command.error(`error: required option '${option.flags}' not specified`, {
          code: 'commander.missingMandatoryOptionValue',
        });
      }
    }
  });
}
