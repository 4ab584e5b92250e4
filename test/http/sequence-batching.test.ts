// Sequence padding and bucketing from serving.properties (batchifier=pad|bucket) over real
// HTTP: requests of different lengths share one forward, each answer is cut back to its own
// length and equals the answer the request gets alone; invalid settings fail the load.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, encodeNpy, encodeNpz } from '@kiln/core';
import { GraphBuilder, attr, writeModelFolder } from '@kiln/model-tools';
import type { BatchMetrics } from '@kiln/worker-pool';
import { v2GrpcClient } from '../support/grpc-client.js';
import { jsonOf, startTestServer, tempDir, type TestServer } from '../support/server-harness.js';

/** `x` float32 [batch, seq] → `y` = x [batch, seq], `total` = Σ x over seq [batch]. */
async function sequenceModel(dir: string, properties: string): Promise<string> {
  const g = new GraphBuilder('sequence');
  g.input('x', 'float32', ['batch', 'seq']);
  g.op('Identity', ['x'], {}, { output: 'y' });
  g.op('ReduceSum', ['x', g.int64s('axes', [1])], { keepdims: attr.int(0) }, { output: 'total' });
  g.output('y', 'float32', ['batch', 'seq']);
  g.output('total', 'float32', ['batch']);
  await writeModelFolder(dir, g.toModel());
  fs.appendFileSync(path.join(dir, 'serving.properties'), properties);
  return dir;
}

/** Row i of a request of length n: n values from i (distinct per request, exact in float32). */
function row(i: number, n: number): Float32Array {
  return Float32Array.from({ length: n }, (_, j) => i + j / 4);
}

const BATCHING = 'batch_size=8\nmax_batch_delay=300\nminWorkers=1\nmaxWorkers=1\n';
const LENGTHS = [3, 9, 1, 14, 6, 2, 11, 5, 7, 16, 4, 12];

describe('sequence batching from serving.properties over HTTP', () => {
  let dir: string;
  let server: TestServer;
  const batches = new Map<string, BatchMetrics[]>();

  beforeAll(async () => {
    dir = tempDir('sequence-batching');
    const model = (name: string, properties: string) =>
      sequenceModel(path.join(dir, name), properties);
    const models = [
      `padded=${await model('padded', `${BATCHING}batchifier=pad\n`)}`,
      // DJL's spelling, and buckets read from .npz bodies.
      `djl=${await model('djl', `${BATCHING}batchifier=padding\npad_value=0\n`)}`,
      `bucketed=${await model('bucketed', `${BATCHING}batchifier=bucket\nbucket_boundaries=4,8,16\nbucket_by=x\n`)}`,
      `stacked=${await model('stacked', BATCHING)}`,
      `unknown=${await model('unknown', 'batchifier=ragged\n')}`,
      `badpad=${await model('badpad', 'batchifier=pad\npad_value=zero\n')}`,
      `badbuckets=${await model('badbuckets', 'batchifier=bucket\nbucket_boundaries=8,4\n')}`,
      `stray=${await model('stray', 'pad_value=0\n')}`,
      `noinput=${await model('noinput', 'batchifier=bucket\nbucket_by=ids\n')}`,
    ];
    server = await startTestServer({ models: models, config: { grpc_address: '127.0.0.1:0' } });
    await server.settled();
    for (const entry of server.server.models.list()) {
      const seen: BatchMetrics[] = [];
      batches.set(entry.name, seen);
      entry.pool?.on('batch', (batch) => seen.push(batch));
    }
  });
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const ask = async (model: string, i: number, n: number, format: 'npy' | 'npz' = 'npy') => {
    const tensor = new Tensor('float32', row(i, n), [1, n]);
    const response = await fetch(`${server.inference}/predictions/${model}`, {
      method: 'POST',
      headers: { accept: 'application/json' },
      body: format === 'npy' ? encodeNpy(tensor) : encodeNpz(NDList.of(tensor.withName('x'))),
    });
    return { status: response.status, body: (await response.json()) as unknown };
  };

  /** Every length at once, then each alone: the same answers, and batches of several. */
  async function checkBatched(model: string, format: 'npy' | 'npz' = 'npy'): Promise<void> {
    const seen = batches.get(model)!;
    const together = await Promise.all(LENGTHS.map((n, i) => ask(model, i, n, format)));
    const batchedRuns = seen.filter((b) => b.batchSize > 1);
    seen.length = 0;
    const alone: typeof together = [];
    for (const [i, n] of LENGTHS.entries()) alone.push(await ask(model, i, n, format));
    for (const [i, n] of LENGTHS.entries()) {
      expect(together[i]!.status).toBe(200);
      expect(together[i]).toEqual(alone[i]);
      // Cut back to its own length: y is the request itself, total its sum (0 pads add nothing).
      const [y, total] = together[i]!.body as { name: string; shape: number[]; data: number[] }[];
      expect(y).toMatchObject({ name: 'y', shape: [1, n], data: [...row(i, n)] });
      expect(total).toMatchObject({ name: 'total', shape: [1] });
      expect(total!.data[0]).toBeCloseTo(
        [...row(i, n)].reduce((a, b) => a + b, 0),
        4,
      );
    }
    // Requests of different lengths ran in one forward.
    expect(batchedRuns.some((b) => b.forwards < b.batchSize)).toBe(true);
  }

  it('pads requests of different lengths into one forward (batchifier=pad)', async () => {
    await checkBatched('padded');
  });

  it("reads DJL's batchifier=padding as pad", async () => {
    await checkBatched('djl');
  });

  it('pads within length buckets (batchifier=bucket), lengths read from .npz bodies', async () => {
    await checkBatched('bucketed', 'npz');
    await checkBatched('bucketed', 'npy');
  });

  it('stacks only equal shapes by default: every length runs alone', async () => {
    const seen = batches.get('stacked')!;
    const together = await Promise.all(LENGTHS.map((n, i) => ask('stacked', i, n)));
    expect(together.every((r) => r.status === 200)).toBe(true);
    expect(seen.every((b) => b.forwards === b.batchSize)).toBe(true);
  });

  it('makes each batch of one declared shape by default, over npy, binary v2 and gRPC: one forward a batch', async () => {
    const seen = batches.get('stacked')!;
    const v2 = async (i: number, n: number) => {
      const header = Buffer.from(
        JSON.stringify({
          inputs: [
            {
              name: 'x',
              datatype: 'FP32',
              shape: [1, n],
              parameters: { binary_data_size: n * 4 },
            },
          ],
          outputs: [{ name: 'y' }],
        }),
      );
      const data = row(i, n);
      const response = await fetch(`${server.inference}/v2/models/stacked/infer`, {
        method: 'POST',
        headers: {
          'content-type': 'application/octet-stream',
          'inference-header-content-length': String(header.length),
        },
        body: Buffer.concat([header, Buffer.from(data.buffer)]),
      });
      const body = (await response.json()) as { outputs: { shape: number[]; data: number[] }[] };
      return { status: response.status, output: body.outputs[0] };
    };
    const grpc = v2GrpcClient(server.server.urls.grpc!);
    const overGrpc = async (i: number, n: number) => {
      const answer = await grpc.call<{
        outputs: { shape: string[] }[];
        raw_output_contents: Buffer[];
      }>('ModelInfer', {
        model_name: 'stacked',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, n] }],
        outputs: [{ name: 'y' }],
        raw_input_contents: [Buffer.from(row(i, n).buffer)],
      });
      const raw = answer.raw_output_contents[0]!;
      const data = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length));
      return {
        status: 200,
        output: { shape: answer.outputs[0]!.shape.map(Number), data: [...data] },
      };
    };
    for (const protocol of ['npy', 'v2', 'grpc'] as const) {
      seen.length = 0;
      // Two lengths, interleaved: stacked, they can share no batch with each other.
      const lengths = Array.from({ length: 16 }, (_, i) => (i % 2 ? 5 : 9));
      const answers = await Promise.all(
        lengths.map(async (n, i) =>
          protocol === 'npy'
            ? ask('stacked', i, n).then(({ status, body }) => ({
                status,
                output: (body as { shape: number[]; data: number[] }[])[0],
              }))
            : protocol === 'v2'
              ? v2(i, n)
              : overGrpc(i, n),
        ),
      );
      for (const [i, n] of lengths.entries()) {
        expect(answers[i]!.status, protocol).toBe(200);
        expect(answers[i]!.output).toMatchObject({ shape: [1, n], data: [...row(i, n)] });
      }
      // The queue kept the lengths apart: no batch was parted again on the worker.
      expect(
        seen.some((b) => b.batchSize > 1),
        protocol,
      ).toBe(true);
      expect(
        seen.map((b) => b.forwards),
        protocol,
      ).toEqual(seen.map(() => 1));
    }
    grpc.close();
  });

  it('fails the load of a model whose batching settings are invalid, saying why', async () => {
    const error = async (name: string) => {
      const { body } = await jsonOf(await server.manage(`/models/${name}`));
      const [described] = body as { status: string; error: string }[];
      expect(described!.status).toBe('FAILED');
      return described!.error;
    };
    expect(await error('unknown')).toMatch(/batchifier=ragged is not one of stack, pad, padding/);
    expect(await error('badpad')).toMatch(/pad_value=zero: must be a number/);
    expect(await error('badbuckets')).toMatch(/bucket_boundaries=8,4: must be increasing/);
    expect(await error('stray')).toMatch(/pad_value need batchifier=pad or batchifier=bucket/);
    expect(await error('noinput')).toMatch(/bucket_by names ids, which is no input of the model/);
    for (const name of ['unknown', 'badpad', 'badbuckets', 'stray', 'noinput'])
      expect(await error(name)).not.toContain(dir);
  });
});
