/**
 * A gRPC ModelInferRequest whose raw tensor a client put off alignment (grpcio's ResNet-18
 * request puts it 3 bytes past a 4-byte boundary), decoded where the model runs: moved down
 * inside its own message buffer (`alignInPlace`, what the server's workers do with the buffers
 * they own) against copied out into fresh memory (a view of bytes off alignment otherwise
 * needs). Each call decodes a message freshly written into one of a few resident buffers, as
 * grpc-js hands them over; only the decode is timed. Rounds alternate; µs a call, median
 * [min–max], the ratio within each round.
 *
 *   node -C @kiln/source --import tsx bench/codecs/grpc-align.ts [--rounds 5] [--calls 2000]
 */
import { parseArgs } from 'node:util';
import { parseGrpcInferRequest } from '@kiln/core';
import { loadInferencePackage } from '@kiln/server';
import { formatSpread, machineLine, ratioSpread, spreadOf } from '../harness/figures.js';
import { alternateRounds } from '../harness/rounds.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    calls: { type: 'string', default: '2000' },
  },
});
const rounds = Number(args.rounds);
const calls = Number(args.calls);

const codec = (
  loadInferencePackage().GRPCInferenceService as unknown as {
    service: { ModelInfer: { requestSerialize(message: unknown): Buffer } };
  }
).service.ModelInfer;
const image = Float32Array.from({ length: 3 * 224 * 224 }, (_, i) => Math.sin(i));
const message = codec.requestSerialize({
  model_name: 'm',
  inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 3, 224, 224] }],
  raw_input_contents: [Buffer.from(image.buffer)],
});
// As grpc-js frames it: 5 bytes of length prefix, then the message.
const FRAME = 5;
const tensorAt = FRAME + message.byteLength - image.byteLength;

/** A few buffers, touched once, that each call's message is written into before it is timed. */
const buffers = Array.from({ length: 8 }, () => new Uint8Array(FRAME + message.byteLength));

function perCall(alignInPlace: boolean): number {
  let ns = 0n;
  let check = 0;
  for (let i = 0; i < calls; i++) {
    const buffer = buffers[i % buffers.length]!;
    buffer.set(message, FRAME);
    const framed = buffer.subarray(FRAME);
    const start = process.hrtime.bigint();
    const { inputs } = parseGrpcInferRequest(framed, { alignInPlace });
    ns += process.hrtime.bigint() - start;
    check += (inputs.tensors[0]!.data as Float32Array)[1]!;
  }
  if (Math.abs(check - calls * image[1]!) > 1e-3 * calls) throw new Error('values changed');
  return Number(ns) / 1000 / calls;
}

console.log(machineLine());
console.log(
  `ModelInferRequest of a float32 [1, 3, 224, 224] tensor (602 kB) at byte ${tensorAt} of its frame (${tensorAt % 4} past alignment); ${calls} calls a round, ${rounds} rounds`,
);
const figures = await alternateRounds(
  [
    { name: 'in place', measure: () => Promise.resolve(perCall(true)) },
    { name: 'copied', measure: () => Promise.resolve(perCall(false)) },
  ],
  { rounds, warmupRounds: 1 },
);
console.log(
  `in place ${formatSpread(spreadOf(figures['in place']!), 1)} µs, copied ${formatSpread(spreadOf(figures.copied!), 1)} µs a call; ` +
    `copied ÷ in place ${formatSpread(ratioSpread(figures.copied!, figures['in place']!), 2)}`,
);
console.log(`end: ${machineLine()}`);
