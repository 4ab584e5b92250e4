import { spawn } from 'node:child_process';
import { basename } from 'node:path';
import { TINY_GPT_PYTHON } from './tiny-gpt.js';

/**
 * Runs Debian's python3 with `args` (the script first) and returns its stdout; rejects with
 * the end of its stderr when it fails.
 */
export async function runPythonScript(args: readonly string[]): Promise<string> {
  const child = spawn(TINY_GPT_PYTHON, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  if (code !== 0)
    throw new Error(`${basename(args[0] ?? 'python3')} exited with ${code}:\n${stderr}`);
  return stdout;
}
