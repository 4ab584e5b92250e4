// Peak memory one request can cost: `npx tsx test/stress/bomb-memory-cli.ts`. Sends npz bombs
// to `kiln serve` (default max_request_size, 64 MiB) and reads the server's peak RSS (VmHWM,
// reset before each request) against its RSS just before.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { zipSync } from 'fflate';
import { NDList, Tensor, encodeNpy, encodeNpz } from '@kiln/core';
import { buildModelStore } from '../support/fixtures.js';
import { startServerProcess } from './server-process.js';

const MAX = 64 * 1024 * 1024;
const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

function status(pid: number, field: string): number {
  const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(text)![1]) * 1024;
}

function post(url: string, body: Uint8Array): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      { method: 'POST', headers: { 'content-type': 'tensor/npz', 'content-length': body.length } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/** One npy entry of `bytes` zeros, declared as `declared` bytes in the zip headers. */
function bomb(bytes: number, declared = bytes): Uint8Array {
  const zip = Buffer.from(
    zipSync(
      { 'a.npy': encodeNpy(new Tensor('uint8', new Uint8Array(bytes), [bytes])) },
      { level: 9 },
    ),
  );
  if (declared !== bytes) {
    const central = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    zip.writeUInt32LE(declared, 22);
    zip.writeUInt32LE(declared, central + 24);
  }
  return zip;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-bomb-'));
const store = await buildModelStore(path.join(dir, 'store'));
const server = await startServerProcess(dir, [`addmul=${store.addMul}`], {
  enable_access_log: 'false',
});
try {
  const rows = Math.floor((MAX - 4096) / 2 / 12);
  const largestAllowed = encodeNpz(
    NDList.of(
      new Tensor('float32', new Float32Array(rows * 3), [rows, 3], 'a'),
      new Tensor('float32', new Float32Array(rows * 3), [rows, 3], 'b'),
    ),
    { compress: true },
  );
  const cases: [string, Uint8Array][] = [
    ['bomb declaring 1000 MiB (~1 MB sent)', bomb(1000 * 2 ** 20)],
    ['bomb declaring 100 B, inflating to 512 MiB', bomb(512 * 2 ** 20, 100)],
    ['largest allowed npz: 2 × 32 MiB float32 inflated, run through the model', largestAllowed],
  ];
  for (const [name, body] of cases) {
    for (let i = 0; i < 3; i++) await post(`${server.inference}/predictions/addmul`, body);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    fs.writeFileSync(`/proc/${server.pid}/clear_refs`, '5'); // resets VmHWM to the current RSS
    const before = status(server.pid, 'VmRSS');
    const code = await post(`${server.inference}/predictions/addmul`, body);
    const peak = status(server.pid, 'VmHWM');
    process.stdout.write(
      `${name}: ${(body.byteLength / 2 ** 20).toFixed(2)} MiB sent, status ${code}, peak cost ${mib(peak - before)} = ${((peak - before) / MAX).toFixed(2)} × max_request_size\n`,
    );
  }
} finally {
  await server.stop();
  fs.rmSync(dir, { recursive: true, force: true });
}
