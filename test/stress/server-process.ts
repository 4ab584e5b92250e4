import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** A `kiln serve` child process: crashes and memory are measured from the outside. */
export interface ServerProcess {
  readonly inference: string;
  readonly management: string;
  readonly metrics: string;
  /** The generated management key, read from the key file. */
  readonly key: string;
  readonly pid: number;
  /** Resident memory of the server process, bytes (Linux /proc). */
  rss(): number;
  alive(): boolean;
  stop(): Promise<void>;
}

const BIN = fileURLToPath(new URL('../../apps/cli/bin/kiln.mjs', import.meta.url));

/** Starts `kiln serve` on ephemeral loopback ports with a config.properties written into `dir`. */
export async function startServerProcess(
  dir: string,
  models: readonly string[],
  properties: Record<string, string>,
): Promise<ServerProcess> {
  const configFile = path.join(dir, 'config.properties');
  fs.writeFileSync(
    configFile,
    Object.entries({
      inference_address: 'http://127.0.0.1:0',
      management_address: 'http://127.0.0.1:0',
      metrics_address: 'http://127.0.0.1:0',
      key_file: path.join(dir, 'key_file.json'),
      ...properties,
    })
      .map(([k, v]) => `${k}=${v}`)
      .join('\n'),
  );
  const child: ChildProcess = spawn(
    process.execPath,
    [BIN, 'serve', '-f', configFile, ...models.flatMap((m) => ['-m', m])],
    // stdout carries the access log: not needed here, and a full pipe would stall the server.
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  let exited = false;
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  child.on('exit', () => (exited = true));
  const expected = models.length;
  for (let i = 0; i < 1200; i++) {
    const settled = (stderr.match(/ (READY|FAILED)/g) ?? []).length;
    if (exited) throw new Error(`kiln serve exited:\n${stderr}`);
    if (settled >= expected && /metrics\s+http/.test(stderr)) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (/FAILED/.test(stderr)) throw new Error(`a model failed to load:\n${stderr}`);
  const url = (name: string) => new RegExp(`${name}\\s+(http://\\S+)`).exec(stderr)![1]!;
  const key = JSON.parse(fs.readFileSync(path.join(dir, 'key_file.json'), 'utf8')).management
    .key as string;
  return {
    inference: url('inference'),
    management: url('management'),
    metrics: url('metrics').replace(/\/metrics$/, ''),
    key,
    pid: child.pid!,
    rss: () => {
      const status = fs.readFileSync(`/proc/${child.pid}/status`, 'utf8');
      return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) * 1024;
    },
    alive: () => !exited,
    stop: async () => {
      if (exited) return;
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await gone;
      clearTimeout(timer);
    },
  };
}
