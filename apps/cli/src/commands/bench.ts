import type { Command } from 'commander';
import type { CliContext } from '../cli-context.js';
import { ReportedFailure } from '../cli-errors.js';

/** Flags of `kiln` itself that kiln-bench understands too, when given before `bench`. */
const SHARED_FLAGS = ['--json', '--verbose'];

/**
 * `kiln bench …` runs kiln-bench with the rest of the command line, untouched: its flags,
 * help and exit codes are kiln-bench's.
 */
export function registerBench(program: Command, _cli: CliContext): void {
  program
    .command('bench')
    .description(
      'benchmark a model in process, a running server over HTTP, or tune serving.properties (kiln-bench)',
    )
    .helpOption(false)
    .allowUnknownOption()
    .allowExcessArguments()
    .argument('[args...]', 'kiln-bench arguments (kiln bench --help lists them)')
    .action(async () => {
      // commander would take --json and --verbose for kiln itself; kiln-bench reads them
      // too (--json may name a file), so it gets the command line as it was written.
      const raw = rawArgs(program);
      const at = raw.indexOf('bench');
      const before = raw.slice(0, at).filter((arg) => SHARED_FLAGS.includes(arg));
      const { runBench } = await import('@kiln/benchmark');
      const code = await runBench([...before, ...raw.slice(at + 1)], { name: 'kiln bench' });
      if (code !== 0) throw new ReportedFailure(code);
    });
}

/** The arguments commander was given (kept on the program, though not in its types). */
function rawArgs(program: Command): string[] {
  const raw = (program as unknown as { rawArgs?: unknown }).rawArgs;
  return Array.isArray(raw) ? raw.map(String) : [];
}
