import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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

/**
 * The local folders of the models `kiln serve` names (`-m [name]=folder`, `--model_dir`), in
 * order, read as servesModels reads the command line: hints for the early host thread, which
 * loads the first one's engine. Models that name their engine (`name::engine=…`), archives,
 * files and remote URLs are left out: only what resolves the same without the server's
 * settings.
 */
export function localModelFolders(args: readonly string[], cwd = process.cwd()): string[] {
  const values: string[] = [];
  args.forEach((arg, i) => {
    const inline = /^(?:--model|--model_dir|-m)=(.*)$/.exec(arg) ?? /^-m([^-=].*)$/.exec(arg);
    if (inline) values.push(inline[1]!);
    else if (/^(?:-m|--model|--model_dir)$/.test(arg) && args[i + 1] !== undefined)
      values.push(args[i + 1]!);
  });
  return values.flatMap((value) => {
    const folder = folderOf(value, cwd);
    return folder === undefined ? [] : [folder];
  });
}

function folderOf(value: string, cwd: string): string | undefined {
  const equals = value.indexOf('=');
  const spec = equals >= 0 ? value.slice(0, equals) : '';
  // [name[:version[:engine[:device]]]]: an engine named here is the server's to honour.
  if (spec.split(':')[2]) return undefined;
  const url = equals >= 0 ? value.slice(equals + 1) : value;
  let path: string;
  try {
    path = url.startsWith('file:') ? fileURLToPath(url) : url;
  } catch {
    return undefined;
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) return undefined;
  const folder = resolve(cwd, path);
  try {
    return statSync(folder).isDirectory() ? folder : undefined;
  } catch {
    return undefined;
  }
}
