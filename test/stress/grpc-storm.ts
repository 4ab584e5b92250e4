import { Client, Metadata, type ServiceError, credentials, status } from '@grpc/grpc-js';
import fc from 'fast-check';
import { loadInferencePackage } from '@kiln/server';
import { type PhaseTally, count, inLanes, newTally } from './phase-tally.js';

/** Answers a hostile call may honestly get; INTERNAL, UNKNOWN and DATA_LOSS are defects. */
const HONEST = new Set<number>([
  status.OK,
  status.CANCELLED,
  status.INVALID_ARGUMENT,
  status.DEADLINE_EXCEEDED,
  status.NOT_FOUND,
  status.RESOURCE_EXHAUSTED,
  status.FAILED_PRECONDITION,
  status.OUT_OF_RANGE,
  status.UNIMPLEMENTED,
  status.UNAVAILABLE,
]);

const INFER = '/inference.GRPCInferenceService/ModelInfer';

interface MessageCodec {
  requestSerialize(message: unknown): Buffer;
  responseDeserialize(bytes: Buffer): unknown;
}

/** ModelInfer's encoder and decoder, from the server's own copy of the proto. */
function modelInferCodec(): MessageCodec {
  const service = loadInferencePackage().GRPCInferenceService as unknown as {
    service: { ModelInfer: MessageCodec };
  };
  return service.service.ModelInfer;
}

interface GrpcCase {
  readonly kind: string;
  readonly bytes: Buffer;
  /** Cancel the call this many ms after sending it. */
  readonly cancelAfterMs?: number;
  readonly deadlineMs?: number;
}

const f32 = (values: number[]) => Buffer.from(new Float32Array(values).buffer);

/** `addmul`'s inputs (a, b: FP32 [n, 3]) with `rows` rows each. */
function addMulRequest(rows: number): Record<string, unknown> {
  const values = Array.from({ length: rows * 3 }, (_, i) => i);
  return {
    model_name: 'addmul',
    inputs: ['a', 'b'].map((name) => ({ name, datatype: 'FP32', shape: [rows, 3] })),
    raw_input_contents: [f32(values), f32(values)],
  };
}

function grpcCases(model: string): fc.Arbitrary<GrpcCase> {
  const codec = modelInferCodec();
  const encode = (message: Record<string, unknown>) => codec.requestSerialize(message);
  const valid = encode(addMulRequest(2));
  const dim = fc.oneof(
    fc.nat({ max: 6 }),
    fc.constantFrom(-1, -7, 2 ** 31, 2 ** 40, Number.MAX_SAFE_INTEGER),
  );
  const datatype = fc.oneof(
    fc.constantFrom('FP32', 'FP16', 'INT64', 'BYTES', 'BOOL', 'UINT8', 'BF16', 'FP64'),
    fc.string({ maxLength: 8 }),
  );
  const input = fc.record({
    name: fc.constantFrom('a', 'b', 'nope', ''),
    datatype,
    shape: fc.array(dim, { maxLength: 5 }),
    contents: fc.option(
      fc.record({
        fp32_contents: fc.array(fc.float(), { maxLength: 12 }),
        int_contents: fc.array(fc.integer(), { maxLength: 12 }),
        bytes_contents: fc.array(
          fc.uint8Array({ maxLength: 8 }).map((a) => Buffer.from(a)),
          { maxLength: 4 },
        ),
      }),
      { nil: undefined },
    ),
  });
  const mismatched = fc
    .record({
      model_name: fc.constantFrom(model, model, 'nope', ''),
      model_version: fc.constantFrom('', '', '1', '99'),
      inputs: fc.array(input, { maxLength: 3 }),
      raw_input_contents: fc.array(
        fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
        { maxLength: 3 },
      ),
      outputs: fc.array(fc.record({ name: fc.constantFrom('sum', 'product', 'nope') }), {
        maxLength: 2,
      }),
    })
    .map((message) => ({ kind: 'grpc mismatched tensors', bytes: encode(message) }));
  const garbage = fc
    .uint8Array({ maxLength: 512 })
    .map((a) => ({ kind: 'grpc unparseable bytes', bytes: Buffer.from(a) }));
  const mutated = fc
    .record({
      flips: fc.array(fc.tuple(fc.nat({ max: valid.length - 1 }), fc.nat({ max: 255 })), {
        minLength: 1,
        maxLength: 6,
      }),
      cut: fc.option(fc.nat({ max: valid.length }), { nil: undefined }),
    })
    .map(({ flips, cut }) => {
      const copy = Buffer.from(valid);
      for (const [at, value] of flips) copy[at] = value;
      return {
        kind: 'grpc mutated message',
        bytes: cut === undefined ? copy : copy.subarray(0, cut),
      };
    });
  const cancelled = fc
    .record({ rows: fc.integer({ min: 1, max: 8 }), after: fc.nat({ max: 4 }) })
    .map(({ rows, after }) => ({
      kind: 'grpc cancelled call',
      bytes: encode(addMulRequest(rows)),
      cancelAfterMs: after,
    }));
  const deadline = fc.nat({ max: 3 }).map((ms) => ({
    kind: 'grpc tiny deadline',
    bytes: valid,
    deadlineMs: ms + 1,
  }));
  return fc.oneof(mutated, garbage, mismatched, cancelled, deadline);
}

function call(
  client: Client,
  c: GrpcCase,
  hangMs: number,
): Promise<{ code: number; details: string; response?: Buffer; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const deadline = Date.now() + (c.deadlineMs ?? hangMs);
    const pending = client.makeUnaryRequest(
      INFER,
      (b: Buffer) => b,
      (b: Buffer) => b,
      c.bytes,
      new Metadata(),
      { deadline },
      (error: ServiceError | null, response?: Buffer) =>
        resolve({
          code: error ? error.code : status.OK,
          details: error?.details ?? '',
          ...(response ? { response } : {}),
          ms: performance.now() - started,
        }),
    );
    if (c.cancelAfterMs !== undefined) setTimeout(() => pending.cancel(), c.cancelAfterMs);
  });
}

/**
 * Hostile ModelInfer calls on the v2 gRPC listener — unparseable and mutated messages,
 * mismatched shapes and datatypes, cancellations and expiring deadlines — with a valid call
 * after every `checkEvery` whose answer must be right.
 */
export async function runGrpcStorm(
  address: string,
  options: {
    requests: number;
    concurrency: number;
    seed: number;
    checkEvery: number;
    hangMs: number;
    alive(): boolean;
  },
): Promise<PhaseTally> {
  const tally = newTally();
  const client = new Client(address, credentials.createInsecure());
  const codec = modelInferCodec();
  const checkValid = async () => {
    const answer = await call(client, { kind: 'valid', bytes: validBytes() }, options.hangMs);
    const out = answer.response
      ? (codec.responseDeserialize(answer.response) as { raw_output_contents: Buffer[] })
      : undefined;
    const sum = out?.raw_output_contents[0];
    const right =
      sum !== undefined &&
      Array.from(new Float32Array(Uint8Array.from(sum).buffer)).join() === '0,2,4,6,8,10';
    if (!right)
      count(tally, 'innocentFailures', {
        kind: 'grpc valid call',
        status: answer.code,
        request: 'ModelInfer addmul [2,3]',
        answer: answer.details,
      });
  };
  const validBytes = () => codec.requestSerialize(addMulRequest(2));
  try {
    let seed = options.seed;
    while (tally.requests < options.requests && options.alive()) {
      const cases = fc.sample(grpcCases('addmul'), {
        numRuns: Math.min(options.checkEvery, options.requests - tally.requests),
        seed: seed++,
      });
      let next = 0;
      await inLanes(options.concurrency, async () => {
        while (next < cases.length && options.alive()) {
          const c = cases[next++]!;
          const answer = await call(client, c, options.hangMs);
          tally.requests++;
          const sample = {
            kind: c.kind,
            status: answer.code,
            request: c.bytes.toString('hex'),
            answer: answer.details,
          };
          if (!options.alive()) count(tally, 'crashes', sample);
          else if (answer.code === status.DEADLINE_EXCEEDED && c.deadlineMs === undefined)
            count(tally, 'hangs', sample);
          else if (!HONEST.has(answer.code)) count(tally, 'unexpected5xx', sample);
          else if (/\bat .+:\d+:\d+|node:internal|\/src\//.test(answer.details))
            count(tally, 'nonJson', { ...sample, answer: `stack or path: ${answer.details}` });
        }
      });
      if (options.alive()) await checkValid();
    }
  } finally {
    client.close();
  }
  return tally;
}
