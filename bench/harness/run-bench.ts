import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/**
 * Runs a bench script as its README does (`node -C @kiln/source --import tsx <script> …`) and
 * answers what it printed: how the benches' own tests check a whole run.
 */
export async function runBench(
  script: URL,
  args: readonly string[],
  timeoutMs: number,
): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--conditions=@kiln/source', '--import', 'tsx', fileURLToPath(script), ...args],
    { timeout: timeoutMs },
  );
  return stdout;
}
