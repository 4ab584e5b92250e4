import { type ChildProcess, execFileSync, fork, spawn } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Tensor, encodeNpy, type ServingInput } from '@kiln/core';
import { createWorkerPool, parsePlacement } from '@kiln/worker-pool';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** The CLI as the registry installs it: built and bundled JS, no TypeScript loader. */
export const KILN_BUILT = `${ROOT}apps/cli/bundle/main.js`;
/** The repository's bin: inside the repository it runs the TypeScript sources through tsx. */
export const KILN_SOURCE = `${ROOT}apps/cli/bin/kiln.mjs`;
/** The Node flags `kiln`'s bin runs with (see apps/cli/bin/kiln.mjs). */
const KILN_NODE_FLAGS = ['--initial-old-space-size=128'];
const NAIVE = fileURLToPath(new URL('./naive-server.mjs', import.meta.url));
const FLOOR = fileURLToPath(new URL('./floor-server.mjs', import.meta.url));
const BARE_PING = fileURLToPath(new URL('./bare-ping-server.mjs', import.meta.url));

export interface Workload {
  readonly label: string;
  readonly modelDir: string;
  readonly modelName: string;
  readonly inputName: string;
  readonly dims: readonly number[];
  readonly concurrency: number;
  /** serving.properties pool settings, written into the model folder for the server too. */
  readonly properties: Readonly<Record<string, string>>;
}

export function inputTensor(workload: Workload): Tensor<'float32'> {
  const size = workload.dims.reduce((a, b) => a * b, 1);
  return new Tensor(
    'float32',
    Float32Array.from({ length: size }, (_, i) => ((i * 7919) % 255) / 255),
    workload.dims,
    workload.inputName,
  );
}

export function npyBody(workload: Workload): Buffer {
  return Buffer.from(encodeNpy(inputTensor(workload)));
}

/** The binary-data v2 request for the workload's input. */
export function v2BinaryRequest(workload: Workload): {
  body: Buffer;
  headers: Record<string, string>;
} {
  const tensor = inputTensor(workload);
  const header = Buffer.from(
    JSON.stringify({
      inputs: [
        {
          name: workload.inputName,
          shape: workload.dims,
          datatype: 'FP32',
          parameters: { binary_data_size: tensor.data.byteLength },
        },
      ],
      parameters: { binary_data_output: true },
    }),
  );
  return {
    body: Buffer.concat([header, Buffer.from(tensor.data.buffer)]),
    headers: {
      'inference-header-content-length': String(header.byteLength),
      'content-type': 'application/octet-stream',
    },
  };
}

export interface RunningServer {
  readonly url: string;
  /** The server's process (its main thread's id too); a server of several processes has none. */
  readonly pid?: number;
  /** Kiln only: where the model's workers run, as `kiln serve` reported it. */
  readonly placement?: string;
  stop(): Promise<void>;
}

/** `kiln serve` arguments for one model, its three listeners on `port`, `port + 1`, `port + 2`. */
export function kilnServeArgs(model: string, modelDir: string, port: number): string[] {
  return [
    'serve',
    '-m',
    `${model}=${modelDir}`,
    '--inference-address',
    `http://127.0.0.1:${port}`,
    '--management-address',
    `http://127.0.0.1:${port + 1}`,
    '--metrics-address',
    `http://127.0.0.1:${port + 2}`,
  ];
}

/** The environment benches run `kiln serve` with: no access log. */
export const KILN_BENCH_ENV = { ...process.env, KILN_ENABLE_ACCESS_LOG: 'false' };

/**
 * Builds the CLI and the packages it uses (`tsc -b apps/cli`, then the files tsc does not emit),
 * so that benches run `kiln` as an installed one runs: built JS. Run from the sources through
 * tsx, the same server did 6-12 % fewer requests per second (tsx's helpers run on every closure
 * it creates).
 */
export function buildKilnCli(): void {
  execFileSync(process.execPath, [`${ROOT}node_modules/typescript/bin/tsc`, '-b', 'apps/cli'], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  // What tsc does not emit (the worker threads' bootstrap module) and the bundles, as
  // `npm pack` adds them.
  execFileSync(process.execPath, [`${ROOT}tools/copy-assets.mjs`], { cwd: ROOT, stdio: 'inherit' });
}

/** `node <flags> <entry> args`, as `kiln`'s bin starts it. */
export function spawnKiln(
  entry: string,
  args: readonly string[],
  options: {
    stdio: 'ignore' | ['ignore', 'pipe', 'pipe'];
    /** More environment (KILN_* server settings) on top of KILN_BENCH_ENV. */
    env?: Readonly<Record<string, string>>;
  },
): ChildProcess {
  return spawn(process.execPath, [...KILN_NODE_FLAGS, entry, ...args], {
    stdio: options.stdio,
    env: { ...KILN_BENCH_ENV, ...options.env },
  });
}

/**
 * `kiln serve` in a child process, as a user would run it — built JS; call `buildKilnCli`
 * first (`extraArgs`: more flags).
 */
export function startKiln(
  workload: Workload,
  port: number,
  extraArgs: readonly string[] = [],
  env: Readonly<Record<string, string>> = {},
): Promise<RunningServer> {
  return startKilnServe(workload.modelName, workload.modelDir, port, extraArgs, env);
}

/** `kiln serve` of one model folder, as startKiln; resolves once the model is READY. */
export async function startKilnServe(
  model: string,
  modelDir: string,
  port: number,
  extraArgs: readonly string[] = [],
  env: Readonly<Record<string, string>> = {},
): Promise<RunningServer> {
  const child = spawnKiln(KILN_BUILT, [...kilnServeArgs(model, modelDir, port), ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
  });
  const ready = await waitForOutput(child, /READY/, /FAILED|error:/);
  // The CLI's line names where the model runs: `READY in 80 ms (inline: …)`.
  const placement = /\((thread|inline): (.*)\)\s*$/.exec(ready);
  const processes = Number(env.KILN_INGRESS_PROCESSES ?? 1);
  if (processes > 1) await allProcessesReady(`http://127.0.0.1:${port + 2}/metrics`, processes);
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => stopChild(child),
    ...(processes === 1 && child.pid !== undefined ? { pid: child.pid } : {}),
    ...(placement ? { placement: `${placement[1]} (${placement[2]})` } : {}),
  };
}

/** The hand-written Koa + onnxruntime-node server. */
export function startNaive(workload: Workload, port: number): Promise<RunningServer> {
  return forkServer('naive server', NAIVE, [`${workload.modelDir}/model.onnx`, String(port)], port);
}

/** Kiln's design written bare (floor-server.mjs): a reference for Kiln's own cost. */
export function startFloor(workload: Workload, port: number): Promise<RunningServer> {
  return forkServer('floor server', FLOOR, [`${workload.modelDir}/model.onnx`, String(port)], port);
}

/** A bare node:http server answering every request at once (the probe's floor under load). */
export function startBarePing(port: number): Promise<RunningServer> {
  return forkServer('bare ping server', BARE_PING, [String(port)], port);
}

/** A plain JavaScript server in a process of its own, up once it sends a message. */
async function forkServer(
  label: string,
  script: string,
  args: readonly string[],
  port: number,
): Promise<RunningServer> {
  const child = fork(script, args, {
    execArgv: [],
    env: process.env,
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`${label} exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => stopChild(child),
    ...(child.pid === undefined ? {} : { pid: child.pid }),
  };
}

/** The same model and pool settings in process: Kiln's predictor path without HTTP. */
export async function startInProcess(workload: Workload) {
  const pool = await createWorkerPool({
    name: workload.modelName,
    model: { url: workload.modelDir, engines: ['@kiln/engine-onnxruntime'] },
    settings: poolSettingsOf(workload),
  });
  return {
    async run(durationMs: number): Promise<{ throughput: number; requests: number }> {
      const body = npyBody(workload);
      let done = 0;
      const started = performance.now();
      const deadline = started + durationMs;
      await Promise.all(
        Array.from({ length: workload.concurrency }, async () => {
          while (performance.now() < deadline) {
            const input: ServingInput = { body: new Uint8Array(body) };
            await pool.predict(input);
            done++;
          }
        }),
      );
      return { throughput: done / ((performance.now() - started) / 1000), requests: done };
    },
    stop: () => pool.shutdown(),
  };
}

/** The model folder's serving.properties, as the pool settings the server would derive. */
function poolSettingsOf(workload: Workload) {
  const props = workload.properties;
  return {
    ...(props.batch_size ? { batchSize: Number(props.batch_size) } : {}),
    ...(props.max_batch_delay ? { maxBatchDelayMs: Number(props.max_batch_delay) } : {}),
    ...(props.minWorkers ? { minWorkers: Number(props.minWorkers) } : {}),
    ...(props.maxWorkers ? { maxWorkers: Number(props.maxWorkers) } : {}),
    // The server's default placement, not the in-process pool's (auto).
    placement: parsePlacement(props.placement ?? 'thread'),
  };
}

/**
 * With several ingress processes the first one prints READY; the summed metrics tell when
 * every process listens and has the model loaded (`kiln_model_ready` is the least of them).
 */
export async function allProcessesReady(metricsUrl: string, processes: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const text = await (await fetch(metricsUrl)).text();
    if (
      new RegExp(`^kiln_ingress_processes ${processes}$`, 'm').test(text) &&
      /^kiln_model_ready\{[^}]*\} 1$/m.test(text)
    )
      return;
    if (Date.now() > deadline) throw new Error(`not every ingress process is ready:\n${text}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Resolves with the first line matching `ready`. */
function waitForOutput(child: ChildProcess, ready: RegExp, failed: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const line = output.split('\n').find((l) => ready.test(l));
      if (line !== undefined) resolve(line);
      else if (failed.test(output)) reject(new Error(output));
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`server exited with ${code}: ${output}`)));
  });
}

/** SIGTERM, then SIGKILL after 10 s; resolves once the child has exited. */
export function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
  });
}

/**
 * CPU time a process's main thread has used so far, in µs (Linux: its task's utime + stime in
 * /proc, clock ticks); undefined where /proc cannot tell.
 */
export function mainThreadCpuUs(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8');
    // Fields after the command name, which may hold spaces: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** USER_HZ: 100 on every Linux Node supports. */
const CLOCK_TICKS = 100;
