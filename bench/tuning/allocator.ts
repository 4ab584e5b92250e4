/**
 * jemalloc against glibc's malloc in Python-mode workers, over HTTP: one server, the same
 * handler registered twice — `option.allocator=default` (glibc) and `option.allocator=jemalloc`
 * (Debian's libjemalloc2 preloaded) — one worker each. The handler allocates as real pre- and
 * post-processing does: per request, numpy arrays of sizes that vary from a few kB to a few MB
 * (decode, normalise, stack, a reduction), so glibc keeps mapping and unmapping large blocks.
 * Contenders alternate over the rounds; prints req/s per contender, the ratio from the same
 * rounds, each worker's allocator as its /proc/<pid>/maps shows it, and the load average.
 *
 *   node -C @kiln/source --import tsx bench/tuning/allocator.ts [--requests 300] [--rounds 3] …
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { findAllocatorLibrary } from '@kiln/core';
import { formatSpread, goalLine, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { startBenchServer } from './bench-server.js';

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '300' },
    concurrency: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '3' },
    'max-mb': { type: 'string', default: '4' },
  },
});
const int = (name: keyof typeof args) => {
  const value = Number(args[name]);
  if (!Number.isSafeInteger(value) || value < 1)
    throw new Error(`--${name} must be an integer ≥ 1`);
  return value;
};

/** TorchServe's guide expects jemalloc to help allocation-heavy handlers; no figure is promised. */
const GOAL = { atLeast: 1.05 };

// Each request: 24 arrays from 4 kB to --max-mb MB (sizes drawn from the request's seed), each
// filled, scaled and reduced, a few stacked; answers its checksum, or its pid for "pid".
const HANDLER = `
import os
import numpy as np
from djl_python import Output

MAX_BYTES = int(os.environ.get("BENCH_MAX_MB", "4")) << 20

def handle(inputs):
    if inputs.is_empty():
        return None
    text = inputs.get_as_string()
    if text == "pid":
        return Output().add(str(os.getpid()))
    rng = np.random.default_rng(int(text))
    sizes = rng.integers(4096, MAX_BYTES, size=24) // 4
    kept = []
    total = 0.0
    for n in sizes:
        a = np.empty(int(n), dtype=np.float32)
        a.fill(0.5)
        b = (a - 0.25) * 2.0
        total += float(b[:: 1024].sum())
        if len(kept) < 4:
            kept.append(b[:256])
    total += float(np.stack(kept).mean())
    return Output().add(f"{total:.3f}")
`;

const CONTENDERS = { glibc: 'default', jemalloc: 'jemalloc' } as const;
type Contender = keyof typeof CONTENDERS;

function post(agent: http.Agent, url: URL, body: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () =>
        res.statusCode === 200
          ? resolve(text)
          : reject(new Error(`HTTP ${res.statusCode}: ${text}`)),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** `count` requests over `concurrency` closed-loop clients; req/s. */
async function load(agent: http.Agent, url: URL, count: number, concurrency: number) {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await post(agent, url, String(next++ % 1000));
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  const library = findAllocatorLibrary('jemalloc');
  const store = mkdtempSync(join(tmpdir(), 'kiln-bench-allocator-'));
  const server = await startBenchServer(
    (Object.keys(CONTENDERS) as Contender[]).map((name) => {
      const dir = join(store, name);
      mkdirSync(dir);
      writeFileSync(join(dir, 'model.py'), HANDLER);
      writeFileSync(
        join(dir, 'serving.properties'),
        [
          'engine=Python',
          'minWorkers=1',
          'maxWorkers=1',
          'batch_size=1',
          `option.allocator=${CONTENDERS[name]}`,
          `option.env=BENCH_MAX_MB=${int('max-mb')}`,
          '',
        ].join('\n'),
      );
      return `${name}=${dir}`;
    }),
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: int('concurrency') });
  try {
    for (let i = 0; i < 200 && server.models.list().length < 2; i++)
      await new Promise((r) => setTimeout(r, 10));
    await Promise.all(server.models.list().map((e) => e.loading));
    for (const entry of server.models.list())
      if (entry.state !== 'READY') throw new Error(`model ${entry.name}: ${entry.error}`);
    const urlOf = (name: string) => new URL(`${server.urls.inference}/predictions/${name}`);
    console.log(machineLine());
    console.log(
      `Python-mode handler: 24 numpy arrays of 4 kB–${args['max-mb']} MB per request; 1 worker a model, ` +
        `batch_size 1; ${args.requests} requests a round over ${args.concurrency} closed-loop HTTP clients; ` +
        `${args.rounds} rounds alternating (1 unrecorded first); jemalloc = ${library}`,
    );
    for (const name of Object.keys(CONTENDERS)) {
      const pid = await post(agent, urlOf(name), 'pid');
      const maps = existsSync(`/proc/${pid}/maps`) ? readFileSync(`/proc/${pid}/maps`, 'utf8') : '';
      console.log(
        `${name.padEnd(8)} worker ${pid}: ${/libjemalloc/.test(maps) ? 'libjemalloc mapped' : 'no libjemalloc (glibc malloc)'}`,
      );
    }
    const figures = await alternateRounds(
      (Object.keys(CONTENDERS) as Contender[]).map((name) => ({
        name,
        measure: () => load(agent, urlOf(name), int('requests'), int('concurrency')),
      })),
      { rounds: int('rounds'), warmupRounds: 1 },
    );
    for (const name of Object.keys(CONTENDERS))
      console.log(`${name.padEnd(8)} ${formatSpread(spreadOf(figures[name]!))} req/s`);
    console.log(goalLine('jemalloc ÷ glibc', ratioSpread(figures.jemalloc!, figures.glibc!), GOAL));
    console.log(machineLine());
  } finally {
    agent.destroy();
    await server.stop();
    rmSync(store, { recursive: true, force: true });
  }
}

await main();
