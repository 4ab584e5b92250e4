import pc from 'picocolors';

/** What every command shares: output streams, colour (only on a TTY) and flags. */
export interface CliContext {
  readonly verbose: boolean;
  readonly json: boolean;
  readonly color: ReturnType<typeof pc.createColors>;
  out(line: string): void;
  err(line: string): void;
}

export function createCliContext(flags: { verbose?: boolean; json?: boolean }): CliContext {
  const useColor = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
  return {
    verbose: Boolean(flags.verbose),
    json: Boolean(flags.json),
    color: pc.createColors(useColor),
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
  };
}
