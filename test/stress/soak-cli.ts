// The soak: `npm run soak -- --minutes 10 [--concurrency 64] [--requests N]`. Keeps
// `concurrency` requests in flight against `kiln serve`, compares every answer to a reference,
// and reports lost or wrong answers, RSS over time and /ping latency under the load.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { isDeepStrictEqual, parseArgs } from 'node:util';
import { NDList, Tensor, encodeNpz } from '@kiln/core';
import { buildModelStore } from '../support/fixtures.js';
import { startServerProcess } from './server-process.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '5' },
    requests: { type: 'string' },
    concurrency: { type: 'string', default: '64' },
  },
});
const concurrency = Number(values.concurrency);
const deadline = Date.now() + Number(values.minutes) * 60_000;
const maxRequests = values.requests === undefined ? Infinity : Number(values.requests);

interface Call {
  path: string;
  headers: Record<string, string>;
  body: Buffer;
  expected: unknown;
}

/** Two models, two codecs: answers that differ per request, so a mixed-up answer is caught. */
function call(i: number): Call {
  const x = i % 97;
  if (i % 2 === 0) {
    const a = new Float32Array([x, 1, 2]);
    const b = new Float32Array([2, x, 3]);
    return {
      path: '/predictions/addmul',
      headers: { accept: 'application/json', 'content-type': 'tensor/npz' },
      body: Buffer.from(
        encodeNpz(
          NDList.of(new Tensor('float32', a, [1, 3], 'a'), new Tensor('float32', b, [1, 3], 'b')),
        ),
      ),
      expected: [
        { name: 'sum', shape: [1, 3], datatype: 'FP32', data: [x + 2, 1 + x, 5] },
        { name: 'product', shape: [1, 3], datatype: 'FP32', data: [2 * x, x, 6] },
      ],
    };
  }
  return {
    path: '/v2/models/addmul/infer',
    headers: { 'content-type': 'application/json' },
    body: Buffer.from(
      JSON.stringify({
        inputs: [
          { name: 'a', shape: [1, 3], datatype: 'FP32', data: [x, 1, 0] },
          { name: 'b', shape: [1, 3], datatype: 'FP32', data: [3, x, 4] },
        ],
      }),
    ),
    expected: {
      model_name: 'addmul',
      outputs: [
        { name: 'sum', datatype: 'FP32', shape: [1, 3], data: [x + 3, 1 + x, 4] },
        { name: 'product', datatype: 'FP32', shape: [1, 3], data: [3 * x, x, 0] },
      ],
    },
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency + 1 });

function send(
  base: string,
  method: string,
  route: string,
  headers: Record<string, string>,
  body?: Buffer,
): Promise<{ status: number; text: string }> {
  const url = new URL(route, base);
  return new Promise((resolve) => {
    const req = http.request(
      url,
      { method, agent, headers: body ? { ...headers, 'content-length': body.length } : headers },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }),
        );
        res.on('error', () => resolve({ status: 0, text: '' }));
      },
    );
    req.on('error', () => resolve({ status: 0, text: '' }));
    req.end(body);
  });
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-soak-'));
const store = await buildModelStore(path.join(dir, 'store'));
const server = await startServerProcess(dir, [`addmul=${store.addMul}`], {
  model_store: path.join(dir, 'store'),
  enable_access_log: 'false',
});
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
/** CPU seconds the server process has used (user + system, from /proc). */
const cpuSeconds = () => {
  const fields = fs.readFileSync(`/proc/${server.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
};
const cpuAtStart = cpuSeconds();
let sent = 0;
let lost = 0;
let wrong = 0;
const rss: { at: number; bytes: number }[] = [{ at: 0, bytes: server.rss() }];
const pings: number[] = [];
const started = Date.now();
const examples: string[] = [];
let cpuUsed = Number.NaN;
try {
  const worker = async () => {
    while (Date.now() < deadline && sent < maxRequests) {
      const i = sent++;
      const c = call(i);
      const answer = await send(server.inference, 'POST', c.path, c.headers, c.body);
      if (answer.status !== 200) {
        lost++;
        if (examples.length < 5) examples.push(`${answer.status} ${answer.text.slice(0, 200)}`);
        continue;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(answer.text);
      } catch {
        parsed = undefined;
      }
      if (!isDeepStrictEqual(parsed, c.expected)) {
        wrong++;
        if (examples.length < 5) examples.push(`wrong: ${answer.text.slice(0, 200)}`);
      }
    }
  };
  const pinger = async () => {
    while (Date.now() < deadline && sent < maxRequests) {
      const t0 = performance.now();
      const { status } = await send(server.inference, 'GET', '/ping', {});
      if (status === 200) pings.push(performance.now() - t0);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  const sampler = setInterval(() => {
    rss.push({ at: Date.now() - started, bytes: server.rss() });
    process.stderr.write(
      `${((Date.now() - started) / 1000).toFixed(0)} s  requests ${sent}  lost ${lost}  wrong ${wrong}  RSS ${mib(rss.at(-1)!.bytes)}  load ${os.loadavg()[0]!.toFixed(2)}\n`,
    );
  }, 5000);
  await Promise.all([pinger(), ...Array.from({ length: concurrency }, worker)]);
  clearInterval(sampler);
  rss.push({ at: Date.now() - started, bytes: server.rss() });
  cpuUsed = cpuSeconds() - cpuAtStart;
} finally {
  agent.destroy();
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}

const seconds = (Date.now() - started) / 1000;
const sorted = [...pings].sort((a, b) => a - b);
const quantile = (q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
const warm = rss.find((r) => r.at >= Math.min(30_000, seconds * 100)) ?? rss[1] ?? rss[0]!;
const half = rss.find((r) => r.at >= (seconds * 1000) / 2) ?? rss.at(-1)!;
const end = rss.at(-1)!;
const lastHalf = rss.filter((r) => r.at >= half.at);
const climb = Math.max(...lastHalf.map((r) => r.bytes)) - half.bytes;
process.stdout.write(
  [
    `requests ${sent} in ${seconds.toFixed(0)} s (${(sent / seconds).toFixed(0)}/s) at concurrency ${concurrency}`,
    `lost ${lost}  wrong ${wrong}`,
    `server CPU ${cpuUsed.toFixed(1)} s = ${((cpuUsed / sent) * 1e6).toFixed(0)} µs per request`,
    `RSS start ${mib(rss[0]!.bytes)}  after warm-up ${mib(warm.bytes)}  at half ${mib(half.bytes)}  end ${mib(end.bytes)}  highest climb over the half-time reading in the last half ${mib(climb)}`,
    `/ping under load: p50 ${quantile(0.5).toFixed(1)} ms  p99 ${quantile(0.99).toFixed(1)} ms  (${pings.length} pings)`,
    `load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} on ${os.availableParallelism()} cores`,
    ...examples.map((e) => `  ${e}`),
    lost === 0 && wrong === 0 ? 'PASS' : 'FAIL',
  ].join('\n') + '\n',
);
process.exitCode = lost === 0 && wrong === 0 ? 0 : 1;
