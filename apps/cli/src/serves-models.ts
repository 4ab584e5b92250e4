/**
 * Whether a command line is `kiln serve` with models named on it (`-m`, `--model`,
 * `--model_dir`, `--demo`), read before commander parses it: a guess that only decides whether
 * a host thread starts early. A wrong guess costs a spare thread that ends on its own.
 */
export function servesModels(args: readonly string[]): boolean {
  const command = args.find((arg) => !arg.startsWith('-'));
  if (command !== 'serve') return false;
  return args.some(
    (arg) => /^(?:-m|--model|--model_dir|--demo)(?:=|$)/.test(arg) || /^-m./.test(arg),
  );
}
