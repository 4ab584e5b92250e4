import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { LoadOptions, LoadResult } from './load-generator.js';

/** Debian's wrk, when installed: a C client that leaves the cores to the servers it loads. */
export function wrkAvailable(): boolean {
  return spawnSync('wrk', ['--version']).error === undefined;
}

/** Closed-loop load with wrk (one thread, `concurrency` connections), parsed into a LoadResult. */
export async function runWrk(options: LoadOptions): Promise<LoadResult> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-wrk-'));
  const bodyFile = path.join(dir, 'body.bin');
  fs.writeFileSync(bodyFile, options.body);
  const headers = Object.entries(options.headers ?? {})
    .map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`)
    .join('\n');
  const script = path.join(dir, 'post.lua');
  fs.writeFileSync(
    script,
    `local f = io.open(${JSON.stringify(bodyFile)}, "rb")\nwrk.method = "POST"\nwrk.body = f:read("*all")\nf:close()\n${headers}\n`,
  );
  // Asynchronous, so that the caller's /ping probe keeps running during the load.
  const { stdout: out } = await promisify(execFile)('wrk', [
    '-t1',
    `-c${options.concurrency}`,
    `-d${Math.max(1, Math.round(options.durationMs / 1000))}s`,
    '--latency',
    // wrk's default 2 s counts a request queued behind a slow model (a serial server doing
    // ResNet-18 at c16 on a busy machine) as a failure; only answers that never come should.
    '--timeout',
    '30s',
    '-s',
    script,
    options.url,
  ]);
  fs.rmSync(dir, { recursive: true, force: true });
  const requests = Number(/(\d+) requests in ([\d.]+)s/.exec(out)?.[1] ?? NaN);
  const seconds = Number(/requests in ([\d.]+)s/.exec(out)?.[1] ?? NaN);
  const errors = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0) + socketErrors(out);
  return {
    requests,
    errors,
    seconds,
    throughput: (requests - errors) / seconds,
    p50: latencyMs(out, '50%'),
    p99: latencyMs(out, '99%'),
    statuses: {},
  };
}

function latencyMs(out: string, label: string): number {
  const match = new RegExp(`\\s${label}\\s+([\\d.]+)(us|ms|s)`).exec(out);
  if (!match) return NaN;
  const value = Number(match[1]);
  return match[2] === 'us' ? value / 1000 : match[2] === 's' ? value * 1000 : value;
}

function socketErrors(out: string): number {
  const match = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return match ? match.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0;
}
