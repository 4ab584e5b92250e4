import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http2 from 'node:http2';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, status as GrpcStatus, credentials } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fromFloat16Bits, toFloat16Bits } from '@kiln/core';
import {
  GRPC_CONNECTION_WINDOW_BYTES,
  GRPC_STREAM_WINDOW_BYTES,
  INFERENCE_PROTO_PATH,
} from '@kiln/server';
import { resnetModel } from '@kiln/model-tools';
import { seededRandom } from '@kiln/testing';
import { buildModelStore, buildSlowModel, type ModelStore } from '../support/fixtures.js';
import { type V2GrpcClient, grpcCodeOf, v2GrpcClient } from '../support/grpc-client.js';
import { type TestServer, sleep, startTestServer, tempDir } from '../support/server-harness.js';

let store: ModelStore;
let t: TestServer;
let grpc: V2GrpcClient;
let root: string;

beforeAll(async () => {
  root = tempDir('grpc');
  store = await buildModelStore(path.join(root, 'store'));
  await resnetModel(path.join(root, 'resnet18'), { depth: 18, classes: 10 });
  // One worker, batch 1: a second request waits in the queue while the first runs. The run is
  // long beside the tests' 50–100 ms waits, so a machine faster or busier than the model's
  // calibration still has the second request queued when its deadline or cancellation comes.
  const slow = await buildSlowModel(
    path.join(root, 'slow'),
    1200,
    'minWorkers=1\nmaxWorkers=1\nbatch_size=1\n',
  );
  t = await startTestServer({
    models: [
      `addmul=${store.addMul}`,
      `addmul:2=${store.addMul}`,
      `fp16=${store.fp16}`,
      `strings=${store.strings}`,
      `iris=${store.iris}`,
      `resnet18=${path.join(root, 'resnet18')}`,
      `slow=${slow}`,
    ],
    config: { grpc_address: '127.0.0.1:0', max_request_size: String(4 * 1024 * 1024) },
  });
  await t.settled();
  grpc = v2GrpcClient(t.server.urls.grpc!);
});

afterAll(async () => {
  grpc?.close();
  await t?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

const f32 = (values: number[]) => Buffer.from(new Float32Array(values).buffer);
const floatsOf = (bytes: Buffer) =>
  Array.from(
    new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)),
  );

interface InferResponse {
  model_name: string;
  model_version: string;
  id: string;
  outputs: { name: string; datatype: string; shape: string[] }[];
  raw_output_contents: Buffer[];
}

const addMulInputs = [
  { name: 'a', datatype: 'FP32', shape: [2, 3] },
  { name: 'b', datatype: 'FP32', shape: [2, 3] },
];

describe('health and metadata', () => {
  it('answers ServerLive, ServerReady, ServerMetadata and ModelReady', async () => {
    expect(await grpc.call('ServerLive', {})).toEqual({ live: true });
    expect(await grpc.call('ServerReady', {})).toEqual({ ready: true });
    const metadata = await grpc.call<{ extensions: string[] }>('ServerMetadata', {});
    expect(metadata).toMatchObject({
      name: 'kiln',
      extensions: expect.arrayContaining(['binary_tensor_data']),
    });
    // The repository extension is served over HTTP only, where the management key guards it.
    expect(metadata.extensions).not.toContain('model_repository');
    expect(await grpc.call('ModelReady', { name: 'addmul', version: '2' })).toEqual({
      ready: true,
    });
    expect(await grpcCodeOf(grpc.call('ModelReady', { name: 'nope' }))).toBe(GrpcStatus.NOT_FOUND);
  });

  it('describes a model as the HTTP metadata does, -1 for dynamic dimensions', async () => {
    const http = await (await fetch(`${t.inference}/v2/models/addmul`)).json();
    const answer = await grpc.call<{ shape?: unknown }>('ModelMetadata', { name: 'addmul' });
    const asNumbers = JSON.parse(JSON.stringify(answer), (key, value: unknown) =>
      key === 'shape' ? (value as string[]).map(Number) : value,
    );
    expect(asNumbers).toEqual(http);
  });
});

describe('ModelInfer', () => {
  it('takes raw_input_contents, answers raw_output_contents, echoes the id and version', async () => {
    const answer = await grpc.call<InferResponse>('ModelInfer', {
      model_name: 'addmul',
      model_version: '2',
      id: 'grpc-1',
      inputs: addMulInputs,
      raw_input_contents: [f32([1, 2, 3, 4, 5, 6]), f32([2, 2, 2, 3, 3, 3])],
    });
    expect(answer).toMatchObject({ model_name: 'addmul', model_version: '2', id: 'grpc-1' });
    expect(answer.outputs).toEqual([
      { name: 'sum', datatype: 'FP32', shape: ['2', '3'], parameters: {}, contents: null },
      { name: 'product', datatype: 'FP32', shape: ['2', '3'], parameters: {}, contents: null },
    ]);
    expect(floatsOf(answer.raw_output_contents[0]!)).toEqual([3, 4, 5, 7, 8, 9]);
    expect(floatsOf(answer.raw_output_contents[1]!)).toEqual([2, 4, 6, 12, 15, 18]);
  });

  it('takes typed contents and returns requested outputs only, in order', async () => {
    const answer = await grpc.call<InferResponse>('ModelInfer', {
      model_name: 'addmul',
      inputs: [
        { ...addMulInputs[0], contents: { fp32_contents: [1, 2, 3, 4, 5, 6] } },
        { ...addMulInputs[1], contents: { fp32_contents: [0.5, 0.5, 0.5, 2, 2, 2] } },
      ],
      outputs: [{ name: 'product' }],
    });
    expect(answer.outputs.map((o) => o.name)).toEqual(['product']);
    expect(floatsOf(answer.raw_output_contents[0]!)).toEqual([0.5, 1, 1.5, 8, 10, 12]);
  });

  it('round-trips FP16 raw and BYTES both raw and typed', async () => {
    const halves = [0.5, -2, 1024, 0.0999755859375];
    const fp16 = await grpc.call<InferResponse>('ModelInfer', {
      model_name: 'fp16',
      inputs: [{ name: 'x', datatype: 'FP16', shape: [1, 4] }],
      raw_input_contents: [Buffer.from(new Uint16Array(halves.map(toFloat16Bits)).buffer)],
    });
    expect(fp16.outputs[0]!.datatype).toBe('FP16');
    const bits = fp16.raw_output_contents[0]!;
    expect(Array.from({ length: 4 }, (_, i) => fromFloat16Bits(bits.readUInt16LE(2 * i)))).toEqual(
      halves,
    );

    const words = ['kiln', 'grpc', 'ünïcödé', ''];
    const typed = await grpc.call<InferResponse>('ModelInfer', {
      model_name: 'strings',
      inputs: [
        {
          name: 'x',
          datatype: 'BYTES',
          shape: [1, 4],
          contents: { bytes_contents: words.map((w) => Buffer.from(w)) },
        },
      ],
    });
    const lengthPrefixed = Buffer.concat(
      words.flatMap((w) => {
        const bytes = Buffer.from(w);
        const length = Buffer.alloc(4);
        length.writeUInt32LE(bytes.length);
        return [length, bytes];
      }),
    );
    expect(typed.outputs[0]!.datatype).toBe('BYTES');
    expect(typed.raw_output_contents[0]).toEqual(lengthPrefixed);
    const raw = await grpc.call<InferResponse>('ModelInfer', {
      model_name: 'strings',
      inputs: [{ name: 'x', datatype: 'BYTES', shape: [1, 4] }],
      raw_input_contents: [lengthPrefixed],
    });
    expect(raw.raw_output_contents[0]).toEqual(lengthPrefixed);
  });

  it('maps errors to gRPC status codes as Triton does, with a clear message', async () => {
    const infer = (request: Record<string, unknown>) =>
      grpc.call('ModelInfer', { model_name: 'addmul', ...request });
    const cases: [Record<string, unknown>, GrpcStatus, RegExp][] = [
      [{ model_name: 'nope' }, GrpcStatus.NOT_FOUND, /model nope not found/],
      [{ model_version: '7' }, GrpcStatus.NOT_FOUND, /no version/],
      [
        { inputs: addMulInputs, raw_input_contents: [f32([1, 2, 3])] },
        GrpcStatus.INVALID_ARGUMENT,
        /raw_input_contents has 1 entries for 2 inputs/,
      ],
      [
        { inputs: addMulInputs, raw_input_contents: [f32([1, 2, 3]), f32([1, 2, 3])] },
        GrpcStatus.INVALID_ARGUMENT,
        /.+/,
      ],
      [
        { inputs: [{ ...addMulInputs[0], contents: { int_contents: [1, 2, 3, 4, 5, 6] } }] },
        GrpcStatus.INVALID_ARGUMENT,
        /belong in fp32_contents, not int_contents/,
      ],
      [
        { inputs: [{ name: 'x', datatype: 'FP16', shape: [1], contents: {} }] },
        GrpcStatus.INVALID_ARGUMENT,
        /raw_input_contents/,
      ],
      [
        { inputs: [{ name: 'a', datatype: 'COMPLEX', shape: [1] }] },
        GrpcStatus.INVALID_ARGUMENT,
        /unknown datatype/,
      ],
      [
        {
          inputs: addMulInputs,
          raw_input_contents: [f32([1, 2, 3, 4, 5, 6]), f32([1, 2, 3, 4, 5, 6])],
          outputs: [{ name: 'nope' }],
        },
        GrpcStatus.INVALID_ARGUMENT,
        /unknown output nope/,
      ],
    ];
    for (const [request, code, message] of cases) {
      const error = await infer(request).then(
        () => undefined,
        (e: { code: number; details: string }) => e,
      );
      expect(error, JSON.stringify(request)).toBeDefined();
      expect(error!.code, error!.details).toBe(code);
      expect(error!.details).toMatch(message);
      expect(error!.details).not.toMatch(/\bat .+:\d+:\d+|node:internal|\.ts:\d+/);
    }
    // The limit on request size holds for gRPC messages too.
    const tooLarge = grpc.call('ModelInfer', {
      model_name: 'addmul',
      inputs: addMulInputs,
      raw_input_contents: [Buffer.alloc(5 * 1024 * 1024), Buffer.alloc(24)],
    });
    expect(await grpcCodeOf(tooLarge)).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(await grpc.call('ServerLive', {})).toEqual({ live: true });
  });

  it('counts calls in kiln_requests_total with api="grpc" and the status name', async () => {
    const text = await (await fetch(`${t.metrics}/metrics`)).text();
    expect(text).toMatch(
      /kiln_requests_total\{api="grpc",route="ModelInfer",model="addmul",status="OK"\} [1-9]/,
    );
    expect(text).toMatch(
      /kiln_requests_total\{api="grpc",route="ModelInfer",model="nope",status="NOT_FOUND"\} 1/,
    );
  });
});

describe('flow control', () => {
  it('lets a client send 1 MiB a call and 8 MiB a connection before it acknowledges', async () => {
    const session = http2.connect(`http://${t.server.urls.grpc!}`);
    try {
      await new Promise<void>((resolve, reject) => {
        session.once('remoteSettings', () => resolve());
        session.once('error', reject);
      });
      expect(session.remoteSettings.initialWindowSize).toBe(GRPC_STREAM_WINDOW_BYTES);
      // The connection's window comes in a WINDOW_UPDATE right after the settings.
      for (
        let i = 0;
        i < 100 && session.state.remoteWindowSize !== GRPC_CONNECTION_WINDOW_BYTES;
        i++
      )
        await sleep(10);
      expect(session.state.remoteWindowSize).toBe(GRPC_CONNECTION_WINDOW_BYTES);
    } finally {
      session.destroy();
    }
  });
});

describe('messages that are no protobuf', () => {
  // Bytes no inference message parses from: a varint running past the end, a wire type 6.
  const garbage = [Buffer.from([0xff, 0xff, 0xff, 0xff]), Buffer.from('not a protobuf message')];

  it('answer INVALID_ARGUMENT on every method, naming the problem', async () => {
    const raw = new Client(t.server.urls.grpc!, credentials.createInsecure());
    const send = (method: string, bytes: Buffer) =>
      new Promise<{ code: number; details: string } | undefined>((resolve) =>
        raw.makeUnaryRequest(
          `/inference.GRPCInferenceService/${method}`,
          (b: Buffer) => b,
          (b: Buffer) => b,
          bytes,
          (error) => resolve(error ? { code: error.code, details: error.details } : undefined),
        ),
      );
    try {
      for (const method of ['ModelInfer', 'ModelMetadata', 'ModelReady']) {
        for (const bytes of garbage) {
          const error = await send(method, bytes);
          expect(error, `${method} ${bytes.toString('hex')}`).toBeDefined();
          expect(error!.code, error!.details).toBe(GrpcStatus.INVALID_ARGUMENT);
          expect(error!.details).toMatch(new RegExp(`${method} request is not a valid protobuf`));
          expect(error!.details).not.toMatch(/\bat .+:\d+:\d+|node:internal|\.ts:\d+/);
        }
      }
    } finally {
      raw.close();
    }
    expect(await grpc.call('ServerLive', {})).toEqual({ live: true });
    const text = await (await fetch(`${t.metrics}/metrics`)).text();
    expect(text).toMatch(
      /kiln_requests_total\{api="grpc",route="ModelInfer",model="",status="INVALID_ARGUMENT"\} 2/,
    );
  });
});

describe('deadlines and cancellation reach the queue', () => {
  const slowRequest = {
    model_name: 'slow',
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
    raw_input_contents: [f32([1, 2, 3, 4])],
  };
  const totals = () => t.server.models.get('slow').pool!.stats().totals;

  it('a queued call whose deadline passes ends DEADLINE_EXCEEDED and its job never runs', async () => {
    const before = totals();
    const running = grpc.call('ModelInfer', slowRequest);
    await sleep(50);
    const late = grpcCodeOf(grpc.call('ModelInfer', slowRequest, { deadlineMs: 100 }));
    expect(await late).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    await running;
    const after = totals();
    expect(after.succeeded - before.succeeded).toBe(1);
    expect(after.expired + after.cancelled - before.expired - before.cancelled).toBe(1);
  });

  it('a call the client cancels leaves the queue', async () => {
    const before = totals();
    const running = grpc.call('ModelInfer', slowRequest);
    await sleep(50);
    const abort = new AbortController();
    const cancelled = grpcCodeOf(grpc.call('ModelInfer', slowRequest, { signal: abort.signal }));
    await sleep(50);
    abort.abort();
    expect(await cancelled).toBe(GrpcStatus.CANCELLED);
    await running;
    // The server learns of the cancellation asynchronously; wait for the queue to say so.
    for (let i = 0; i < 100 && totals().cancelled === before.cancelled; i++) await sleep(20);
    const after = totals();
    expect(after.cancelled - before.cancelled).toBe(1);
    expect(after.succeeded - before.succeeded).toBe(1);
  });
});

const python = '/usr/bin/python3';
const hasGrpcio =
  spawnSync(python, ['-c', 'import grpc, grpc_tools, numpy'], { stdio: 'ignore' }).status === 0;
if (!hasGrpcio)
  console.warn(
    'skipping the grpcio client test: /usr/bin/python3 lacks grpcio, grpc_tools or numpy (Debian python3-grpcio python3-grpc-tools python3-numpy)',
  );

describe.skipIf(!hasGrpcio)('an independent client: Python grpcio', () => {
  it('gets bit-for-bit the answers HTTP v2 binary gives, raw and typed', async () => {
    const stubs = tempDir('grpc-stubs');
    execFileSync(python, [
      '-m',
      'grpc_tools.protoc',
      `-I${path.dirname(INFERENCE_PROTO_PATH)}`,
      `--python_out=${stubs}`,
      `--grpc_python_out=${stubs}`,
      path.basename(INFERENCE_PROTO_PATH),
    ]);
    const random = seededRandom(18);
    const cases = [
      { model: 'iris', inputs: [{ name: 'features', datatype: 'FP32', shape: [3, 4], n: 12 }] },
      {
        model: 'resnet18',
        inputs: [{ name: 'input', datatype: 'FP32', shape: [1, 3, 224, 224], n: 3 * 224 * 224 }],
      },
    ];
    for (const { model, inputs } of cases) {
      const tensors = inputs.map(({ n, ...spec }) => ({
        ...spec,
        raw: f32(Array.from({ length: n }, () => random() * 4 - 2)),
      }));
      const http = await httpBinaryInfer(model, tensors);
      // The server runs in this process: the client must not block its event loop.
      const stdout = await runPython(
        [path.join(here, 'v2_grpc_client.py'), stubs, t.server.urls.grpc!],
        JSON.stringify({
          model,
          inputs: tensors.map(({ raw, ...spec }) => ({ ...spec, raw_b64: raw.toString('base64') })),
        }),
      );
      const answer = JSON.parse(stdout) as {
        live: boolean;
        ready: boolean;
        model_ready: boolean;
        server_name: string;
        id: string;
        unknown_model: string;
        outputs: { name: string; datatype: string; shape: number[]; raw_b64: string }[];
        typed_outputs: { raw_b64: string }[];
      };
      expect(answer).toMatchObject({
        live: true,
        ready: true,
        model_ready: true,
        server_name: 'kiln',
        id: 'py-raw',
        unknown_model: 'NOT_FOUND',
      });
      expect(
        answer.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape })),
      ).toEqual(http.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape })));
      answer.outputs.forEach((o, i) => {
        expect(Buffer.from(o.raw_b64, 'base64').equals(http.raw[i]!), `${model} ${o.name}`).toBe(
          true,
        );
        expect(answer.typed_outputs[i]!.raw_b64).toBe(o.raw_b64);
      });
    }
    fs.rmSync(stubs, { recursive: true, force: true });
  });

  it('gets INVALID_ARGUMENT for bytes that are no ModelInferRequest', async () => {
    // No serializer: grpcio sends the bytes as they are.
    const script = [
      'import sys, grpc',
      'with grpc.insecure_channel(sys.argv[1]) as channel:',
      "    infer = channel.unary_unary('/inference.GRPCInferenceService/ModelInfer')",
      '    try:',
      '        infer(bytes([0xff] * 4), timeout=30)',
      "        print('OK')",
      '    except grpc.RpcError as error:',
      '        print(error.code().name, error.details())',
    ].join('\n');
    const stdout = await runPython(['-c', script, t.server.urls.grpc!], '');
    expect(stdout).toMatch(/^INVALID_ARGUMENT the ModelInfer request is not a valid protobuf/);
  });
});

const here = path.dirname(fileURLToPath(import.meta.url));

/** The same inference over HTTP with the binary-data extension, outputs binary. */
async function httpBinaryInfer(
  model: string,
  tensors: { name: string; datatype: string; shape: number[]; raw: Buffer }[],
): Promise<{ outputs: { name: string; datatype: string; shape: number[] }[]; raw: Buffer[] }> {
  const header = Buffer.from(
    JSON.stringify({
      inputs: tensors.map(({ raw, ...spec }) => ({
        ...spec,
        parameters: { binary_data_size: raw.length },
      })),
      parameters: { binary_data_output: true },
    }),
  );
  const response = await fetch(`${t.inference}/v2/models/${model}/infer`, {
    method: 'POST',
    body: Buffer.concat([header, ...tensors.map((x) => x.raw)]),
    headers: { 'inference-header-content-length': String(header.length) },
  });
  expect(response.status).toBe(200);
  const body = Buffer.from(await response.arrayBuffer());
  const jsonLength = Number(response.headers.get('inference-header-content-length'));
  const reply = JSON.parse(body.subarray(0, jsonLength).toString()) as {
    outputs: {
      name: string;
      datatype: string;
      shape: number[];
      parameters: { binary_data_size: number };
    }[];
  };
  let at = jsonLength;
  const raw = reply.outputs.map((o) => {
    const bytes = body.subarray(at, at + o.parameters.binary_data_size);
    at += o.parameters.binary_data_size;
    return bytes;
  });
  return {
    outputs: reply.outputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    raw,
  };
}

function runPython(args: string[], input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0
        ? resolve(Buffer.concat(out).toString())
        : reject(new Error(`python exited ${code}: ${Buffer.concat(err).toString()}`)),
    );
    child.stdin.end(input);
  });
}

describe('SIGTERM drain', () => {
  it('answers calls in flight, refuses new ones with UNAVAILABLE, then closes', async () => {
    const slow = await buildSlowModel(
      path.join(root, 'slow-drain'),
      300,
      'minWorkers=1\nmaxWorkers=1\nbatch_size=1\n',
    );
    const server = await startTestServer({
      models: [`slow=${slow}`],
      config: { grpc_address: '127.0.0.1:0' },
    });
    await server.settled();
    const client = v2GrpcClient(server.server.urls.grpc!);
    const request = {
      model_name: 'slow',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
      raw_input_contents: [f32([1, 2, 3, 4])],
    };
    try {
      const inFlight = [client.call('ModelInfer', request), client.call('ModelInfer', request)];
      await sleep(50);
      const stopped = server.stop();
      const refused = grpcCodeOf(client.call('ModelInfer', request));
      expect(await refused).toBe(GrpcStatus.UNAVAILABLE);
      const answers = await Promise.all(inFlight);
      expect(answers.map((a) => (a as { model_name: string }).model_name)).toEqual([
        'slow',
        'slow',
      ]);
      await stopped;
      expect(await grpcCodeOf(client.call('ServerLive', {}, { deadlineMs: 2000 }))).toBe(
        GrpcStatus.UNAVAILABLE,
      );
    } finally {
      client.close();
    }
  });
});
