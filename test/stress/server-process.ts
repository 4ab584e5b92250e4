import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** A `kiln serve` child process: crashes and memory are measured from the outside. */
export interface ServerProcess {
  readonly inference: string;
  readonly management: string;
  readonly metrics: string;
  /** The v2 gRPC listener's `host:port`, when config.properties names a grpc_address. */
  readonly grpc: string | undefined;
  /** The generated management key, read from the key file. */
  readonly key: string;
  readonly pid: number;
  /** Resident memory of the server's processes (ingress processes included), bytes (/proc). */
  rss(): number;
  /** False once the server exited, or (ingress_processes > 1) any of its processes crashed. */
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
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  let exited = false;
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  child.on('exit', () => (exited = true));
  // stdout carries the JSON log (access log included): read, so that a full pipe never stalls
  // the server, and watched for an ingress process that died and was replaced.
  let crashedProcesses = 0;
  let tail = '';
  child.stdout!.on('data', (d: Buffer) => {
    const text = tail + d.toString();
    crashedProcesses += text.split('"msg":"ingress process exited; starting another"').length - 1;
    tail = text.slice(-64);
  });
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
  const processes = Number(properties.ingress_processes ?? 1);
  // The first process prints READY; the summed metrics say when every process serves.
  if (processes > 1) await everyProcessServes(url('metrics'), processes, expected);
  return {
    inference: url('inference'),
    management: url('management'),
    metrics: url('metrics').replace(/\/metrics$/, ''),
    grpc: /grpc\s+(\S+)/.exec(stderr)?.[1],
    key,
    pid: child.pid!,
    rss: () => treeRss(child.pid!),
    alive: () => !exited && crashedProcesses === 0,
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

/** Resident memory of a process and its descendants, bytes. */
function treeRss(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const children = fs
    .readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
    .split(' ')
    .filter(Boolean)
    .map(Number);
  return (
    Number(/VmRSS:\s+(\d+)/.exec(status)![1]) * 1024 +
    children.reduce((sum, child) => sum + treeRss(child), 0)
  );
}

async function everyProcessServes(metricsUrl: string, processes: number, models: number) {
  for (let i = 0; i < 1200; i++) {
    const text = await (await fetch(metricsUrl)).text();
    const ready = text.match(/^kiln_model_ready\{[^}]*\} 1$/gm)?.length ?? 0;
    if (new RegExp(`^kiln_ingress_processes ${processes}$`, 'm').test(text) && ready >= models)
      return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`not every ingress process serves its models (${metricsUrl})`);
}
