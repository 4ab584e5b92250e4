/**
 * Kiln's npy codec (`encodeNpy`, `decodeNpy` in @kiln/core) against the one the naive server of
 * bench/server writes by hand (bench/server/naive-npy.mjs), per call on the bodies the server
 * benches send and answer: the `mlp` answer (float32 [1, 10]), the `mlp` body (float32 [1, 64])
 * and a ResNet-18 image (float32 [1, 3, 224, 224], 602 kB). Rounds of `--calls` calls alternate
 * between the two; figures are µs per call, median [min–max] over the rounds, and the ratio is
 * taken within each round.
 *
 *   node -C @kiln/source --import tsx bench/codecs/run.ts [--rounds 5] [--calls 20000]
 */
import { parseArgs } from 'node:util';
import ort from 'onnxruntime-node';
import { Tensor, decodeNpy, encodeNpy } from '@kiln/core';
import { formatSpread, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';
import { readNpy, writeNpy } from '../server/naive-npy.mjs';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    calls: { type: 'string', default: '20000' },
  },
});
const rounds = Number(args.rounds);
const calls = Number(args.calls);

/** µs per call of `work`, over `count` calls; `sink` keeps the results alive to the end. */
function perCall(work: () => unknown, count: number): number {
  const sink: unknown[] = new Array(16);
  const start = process.hrtime.bigint();
  for (let i = 0; i < count; i++) sink[i & 15] = work();
  const us = Number(process.hrtime.bigint() - start) / 1000 / count;
  if (sink.includes(undefined)) throw new Error('a call returned nothing');
  return us;
}

async function compare(label: string, kiln: () => unknown, naive: () => unknown, count: number) {
  const figures = await alternateRounds(
    [
      { name: 'kiln', measure: () => Promise.resolve(perCall(kiln, count)) },
      { name: 'naive', measure: () => Promise.resolve(perCall(naive, count)) },
    ],
    { rounds, warmupRounds: 1 },
  );
  console.log(
    `${label}: Kiln ${formatSpread(spreadOf(figures.kiln!), 2)} µs, naive ${formatSpread(spreadOf(figures.naive!), 2)} µs a call; ` +
      `naive ÷ Kiln time ${formatSpread(ratioSpread(figures.naive!, figures.kiln!), 2)}`,
  );
}

const values = (n: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i));
const answer = values(10);
const kilnAnswer = new Tensor('float32', answer, [1, 10]);
const ortAnswer = new ort.Tensor('float32', answer, [1, 10]);
const small = Buffer.from(encodeNpy(new Tensor('float32', values(64), [1, 64])));
const image = Buffer.from(
  encodeNpy(new Tensor('float32', values(3 * 224 * 224), [1, 3, 224, 224])),
);

console.log(machineLine());
await compare(
  'encode the mlp answer [1,10]',
  () => encodeNpy(kilnAnswer),
  () => writeNpy(ortAnswer),
  calls,
);
await compare(
  'decode the mlp body [1,64]',
  () => decodeNpy(small),
  () => readNpy(small),
  calls,
);
await compare(
  'decode a 602 kB image [1,3,224,224]',
  () => decodeNpy(image),
  () => readNpy(image),
  Math.max(1, Math.round(calls / 100)),
);
console.log(machineLine());
