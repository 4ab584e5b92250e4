import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { INFERENCE_PROTO_PATH } from '@kiln/server';

const PYTHON = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('./python_load.py', import.meta.url));

/** Whether Debian's Python has grpcio and grpc_tools (python3-grpcio, python3-grpc-tools). */
export function pythonGrpcAvailable(): boolean {
  return spawnSync(PYTHON, ['-c', 'import grpc, grpc_tools'], { stdio: 'ignore' }).status === 0;
}

/** Generates the Python stubs from Kiln's .proto into a fresh folder; returns it. */
export function generatePythonStubs(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-grpc-stubs-'));
  execFileSync(PYTHON, [
    '-m',
    'grpc_tools.protoc',
    `-I${path.dirname(INFERENCE_PROTO_PATH)}`,
    `--python_out=${dir}`,
    `--grpc_python_out=${dir}`,
    path.basename(INFERENCE_PROTO_PATH),
  ]);
  return dir;
}

/** One closed-loop pass from Python (grpcio or http.client) in its own process; req/s. */
export function runPythonLoad(options: {
  mode: 'grpc' | 'http';
  target: string;
  concurrency: number;
  durationMs: number;
  stubs: string;
  input: Buffer;
  /** Told the client process's CPU seconds (all its threads) and the requests it made. */
  onClientCpu?: (cpuSeconds: number, requests: number) => void;
}): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [
      SCRIPT,
      options.mode,
      options.target,
      String(options.concurrency),
      String(options.durationMs / 1000),
      options.stubs,
    ]);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0)
        return reject(new Error(`python load exited ${code}: ${Buffer.concat(err).toString()}`));
      const result = JSON.parse(Buffer.concat(out).toString()) as {
        requests: number;
        errors: number;
        seconds: number;
        cpu_seconds: number;
      };
      if (result.errors > 0)
        return reject(new Error(`${options.mode}: ${result.errors} failed requests`));
      options.onClientCpu?.(result.cpu_seconds, result.requests);
      resolve(result.requests / result.seconds);
    });
    child.stdin.end(options.input);
  });
}
