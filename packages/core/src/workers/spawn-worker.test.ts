import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

describe('spawnModuleWorker', () => {
  it('starts a worker in a process whose code came on the command line (--input-type)', async () => {
    const packageDir = fileURLToPath(new URL('../..', import.meta.url));
    const workerCode = encodeURIComponent(
      'import { parentPort } from "node:worker_threads"; parentPort.postMessage("ready");',
    );
    const script = [
      "import { spawnModuleWorker } from '@kiln/core';",
      `const worker = spawnModuleWorker(new URL('data:text/javascript,${workerCode}'));`,
      'worker.on("message", (m) => { process.stdout.write(m); void worker.terminate(); });',
      'worker.on("error", (e) => process.stdout.write(`error: ${e.message}`));',
    ].join('\n');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['-C', '@kiln/source', '--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: packageDir, timeout: 20_000 },
    );
    expect(stdout).toBe('ready');
  }, 30_000);
});
