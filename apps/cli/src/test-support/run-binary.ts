import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';

export const KILN_BIN = fileURLToPath(new URL('../../bin/kiln.mjs', import.meta.url));
export const KILN_BENCH_BIN = fileURLToPath(
  new URL('../../../benchmark/bin/kiln-bench.mjs', import.meta.url),
);

export interface BinaryResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunOptions {
  readonly cwd?: string;
  /** Written to the child's stdin, which is then closed. */
  readonly input?: string;
  readonly timeoutMs?: number;
  /** Added to the child's environment. */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * Runs a binary in a child process as a user would (no TTY: no colour, no progress bars) and
 * collects its exit code and output; a child still running after the timeout is killed.
 */
export function runBinary(
  bin: string,
  args: readonly string[],
  options: RunOptions = {},
): Promise<BinaryResult> {
  return new Promise((resolve, reject) => {
    // The file itself, through its shebang and the Node flags it gives, as a shell runs it.
    const child = spawn(bin, args, {
      cwd: options.cwd,
      env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0', ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** `kiln …` in a child process. */
export function kiln(args: readonly string[], options?: RunOptions): Promise<BinaryResult> {
  return runBinary(KILN_BIN, args, options);
}

/** Output a failing command must never show: a JavaScript stack trace. */
export const STACK_TRACE = /\n\s+at .+:\d+:\d+/;

/**
 * `kiln serve <args>` on loopback: inference on `inferencePort` (an ephemeral one by default),
 * management and metrics on ephemeral ones.
 */
export function serveArgs(args: readonly string[], inferencePort = 0): string[] {
  return [
    'serve',
    ...args,
    '--inference-address',
    `http://127.0.0.1:${inferencePort}`,
    '--management-address',
    'http://127.0.0.1:0',
    '--metrics-address',
    'http://127.0.0.1:0',
  ];
}

/**
 * `kiln serve <args>` on ephemeral loopback ports, left running (its banner on stderr names
 * the ports).
 */
export function spawnKilnServe(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): ChildProcessWithoutNullStreams {
  return spawn(KILN_BIN, serveArgs(args), { env: { ...process.env, NO_COLOR: '1', ...env } });
}

/** A loopback port a listener of this process holds until `close()`. */
export async function takenPort(): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
