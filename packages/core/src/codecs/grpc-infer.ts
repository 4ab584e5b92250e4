import { KilnError, KilnErrorCode } from '../errors.js';
import { bytesPerElement, dtypeNames, fromV2DType, isNumericDType } from '../tensor/dtype.js';
import { NDList } from '../tensor/ndlist.js';
import type { AnyTensor } from '../tensor/tensor.js';
import { I32, I64, LEN, VARINT, WireError, WireReader, WireWriter } from './protobuf-wire.js';
import { alignDownInPlace } from './raw-data.js';
import { decodeBinaryTensor, encodeBinaryTensor } from './v2-binary.js';
import { requestedOutput } from './v2-infer.js';
import { decodeV2Tensor } from './v2-json.js';

// The Open Inference Protocol's gRPC ModelInferRequest and ModelInferResponse
// (grpc_predict_v2.proto), read from and written to their wire bytes where the model runs:
// raw_input_contents are decoded in place, as the HTTP binary-data extension's bytes are.

/** A parsed ModelInferRequest: tensors plus what the reply should hold. */
export interface GrpcInferRequest {
  readonly id: string;
  readonly inputs: NDList;
  /** Requested output names, in order; empty = all. */
  readonly outputs: readonly string[];
}

interface InputSpec {
  name: string;
  datatype: string;
  shape: bigint[];
  contents: Contents | undefined;
}

/** InferTensorContents' elements by field name (`fp32_contents`). */
type Contents = Record<string, unknown[]>;

/** InferTensorContents' fields by number: name, wire type of one element, element reader. */
const CONTENTS: Readonly<Record<number, readonly [string, number, (r: WireReader) => unknown]>> = {
  1: ['bool_contents', VARINT, (r) => r.varint() !== 0n],
  2: ['int_contents', VARINT, (r) => Number(BigInt.asIntN(32, r.varint()))],
  3: ['int64_contents', VARINT, (r) => BigInt.asIntN(64, r.varint()).toString()],
  4: ['uint_contents', VARINT, (r) => Number(BigInt.asUintN(32, r.varint()))],
  5: ['uint64_contents', VARINT, (r) => r.varint().toString()],
  6: ['fp32_contents', I32, (r) => r.float()],
  7: ['fp64_contents', I64, (r) => r.double()],
  8: ['bytes_contents', LEN, (r) => r.bytes()],
};

/** Which InferTensorContents field carries each v2 datatype (FP16 and BF16 travel raw only). */
const CONTENTS_FIELD: Readonly<Record<string, string>> = {
  BOOL: 'bool_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
};

const utf8 = new TextDecoder('utf-8', { fatal: true });

function invalid(message: string): KilnError {
  return new KilnError(KilnErrorCode.InvalidInput, message);
}

/** Runs `read`, reporting bytes that are no such message as the client's error. */
function parsing<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (!(error instanceof WireError)) throw error;
    throw invalid(`the ModelInfer request is not a valid protobuf message: ${error.message}`);
  }
}

/**
 * The model a ModelInferRequest is for, read without decoding its tensors: enough for a
 * server to route the request's bytes to where the model runs.
 */
export function grpcInferTarget(message: Uint8Array): { model: string; version: string } {
  return parsing(() => {
    const reader = new WireReader(message);
    let model = '';
    let version = '';
    while (!reader.done) {
      const { field, wire } = reader.tag();
      if (field === 1 || field === 2) {
        reader.expect(wire, LEN, field === 1 ? 'model_name' : 'model_version');
        if (field === 1) model = reader.string();
        else version = reader.string();
      } else reader.skip(wire);
    }
    return { model, version };
  });
}

/** What grpcInferLayout reads at most before it leaves a request to the worker's decoder. */
/**
 * What grpcInferLayout reads at most before it leaves a request to the worker's decoder:
 * fields walked, inputs, dimensions of one input, bytes of a name or datatype.
 */
const DECLARED_LIMITS = { fields: 1024, inputs: 64, rank: 32, textBytes: 256 };

/** Thrown (and caught) where a message outgrows DECLARED_LIMITS. */
class PastLimits extends Error {}

/** Counts what readInput reads against DECLARED_LIMITS; it throws PastLimits past them. */
class ReadBudget {
  private fields = DECLARED_LIMITS.fields;

  field(): void {
    if (--this.fields < 0) throw new PastLimits();
  }

  dimension(rank: number): void {
    if (rank >= DECLARED_LIMITS.rank) throw new PastLimits();
  }

  text(bytes: Uint8Array): Uint8Array {
    if (bytes.byteLength > DECLARED_LIMITS.textBytes) throw new PastLimits();
    return bytes;
  }
}

/**
 * The inputs a ModelInferRequest declares (name, v2 datatype, shape), read without their
 * contents: cheap enough for a queue to key the request by where it arrives, and bounded
 * (DECLARED_LIMITS) so that a hostile message costs the reading thread no more than a
 * well-formed one. Undefined for bytes that are no such message, an input without a name or
 * valid shape, or a message past those bounds.
 */
export function grpcInferLayout(
  message: Uint8Array,
): { name: string; datatype: string; shape: number[] }[] | undefined {
  const budget = new ReadBudget();
  try {
    const reader = new WireReader(message);
    const inputs: { name: string; datatype: string; shape: number[] }[] = [];
    while (!reader.done) {
      budget.field();
      const { field, wire } = reader.tag();
      if (field !== 5) {
        reader.skip(wire);
        continue;
      }
      reader.expect(wire, LEN, 'an input');
      if (inputs.length === DECLARED_LIMITS.inputs) return undefined;
      const spec = readInput(reader.message(), budget);
      inputs.push({ name: spec.name, datatype: spec.datatype, shape: shapeOf(spec) });
    }
    return inputs;
  } catch {
    return undefined;
  }
}

/**
 * A ModelInferRequest's tensors. Either every input travels in `raw_input_contents` (one entry
 * each, in order, viewed in place when aligned), or every input carries typed `contents`, as
 * Triton requires. With `alignInPlace`, for a message whose buffer the caller owns, raw
 * contents a client put off alignment are moved down over the message's own framing rather
 * than copied out: a view then needs no fresh memory.
 */
export function parseGrpcInferRequest(
  message: Uint8Array,
  options: { readonly alignInPlace?: boolean } = {},
): GrpcInferRequest {
  const { id, specs, outputs, raw } = parsing(() => readRequest(message));
  if (raw.length > 0 && raw.length !== specs.length) {
    throw invalid(
      `raw_input_contents has ${raw.length} entries for ${specs.length} inputs: send every input raw, or none`,
    );
  }
  if (options.alignInPlace) alignRawInPlace(message, specs, raw);
  const inputs = specs.map((spec, i) => {
    const shape = shapeOf(spec);
    if (raw.length === 0) return fromContents(spec, shape);
    if (hasContents(spec.contents)) {
      throw invalid(`input ${spec.name} has both contents and raw_input_contents`);
    }
    return decodeBinaryTensor(spec.datatype, shape, raw[i]!, spec.name);
  });
  return { id, inputs: new NDList(inputs), outputs };
}

/**
 * Moves each raw entry down to its element size's alignment, in order: everything below an
 * entry was read already, except the entries before it, which it never reaches.
 */
function alignRawInPlace(
  message: Uint8Array,
  specs: readonly InputSpec[],
  raw: Uint8Array[],
): void {
  let floor = message.byteOffset;
  raw.forEach((bytes, i) => {
    let width = 1;
    try {
      const dtype = fromV2DType(specs[i]!.datatype);
      if (isNumericDType(dtype)) width = bytesPerElement(dtype);
    } catch {
      // An unknown datatype is refused where the tensor is decoded.
    }
    raw[i] = alignDownInPlace(bytes, width, floor);
    floor = raw[i]!.byteOffset + raw[i]!.byteLength;
  });
}

function readRequest(message: Uint8Array) {
  const reader = new WireReader(message);
  let id = '';
  const specs: InputSpec[] = [];
  const outputs: string[] = [];
  const raw: Uint8Array[] = [];
  while (!reader.done) {
    const { field, wire } = reader.tag();
    if (field === 3) {
      reader.expect(wire, LEN, 'id');
      id = reader.string();
    } else if (field === 5) {
      reader.expect(wire, LEN, 'an input');
      specs.push(readInput(reader.message()));
    } else if (field === 6) {
      reader.expect(wire, LEN, 'an output');
      outputs.push(readOutputName(reader.message()));
    } else if (field === 7) {
      reader.expect(wire, LEN, 'raw_input_contents');
      raw.push(reader.bytes());
    } else reader.skip(wire); // model_name and version were routed on; parameters unused
  }
  return { id, specs, outputs, raw };
}

/**
 * One InferInputTensor. With a `budget` (a queue's look at the request), its contents are
 * skipped and what it reads is counted against DECLARED_LIMITS.
 */
function readInput(reader: WireReader, budget?: ReadBudget): InputSpec {
  const spec: InputSpec = { name: '', datatype: '', shape: [], contents: undefined };
  while (!reader.done) {
    budget?.field();
    const { field, wire } = reader.tag();
    if (field === 1 || field === 2) {
      reader.expect(wire, LEN, field === 1 ? 'an input name' : 'an input datatype');
      const text = budget ? utf8.decode(budget.text(reader.bytes())) : reader.string();
      spec[field === 1 ? 'name' : 'datatype'] = text;
    } else if (field === 3) {
      reader.repeated(
        wire,
        VARINT,
        (r) => {
          budget?.dimension(spec.shape.length);
          return BigInt.asIntN(64, r.varint());
        },
        spec.shape,
      );
    } else if (field === 5 && !budget) {
      reader.expect(wire, LEN, 'input contents');
      spec.contents = readContents(reader.message(), spec.contents ?? {});
    } else reader.skip(wire);
  }
  return spec;
}

function readContents(reader: WireReader, contents: Contents): Contents {
  while (!reader.done) {
    const { field, wire } = reader.tag();
    const known = CONTENTS[field];
    if (!known) {
      reader.skip(wire);
      continue;
    }
    const [name, elementWire, read] = known;
    reader.repeated(wire, elementWire, read, (contents[name] ??= []));
  }
  return contents;
}

function readOutputName(reader: WireReader): string {
  let name = '';
  while (!reader.done) {
    const { field, wire } = reader.tag();
    if (field === 1) {
      reader.expect(wire, LEN, 'an output name');
      name = reader.string();
    } else reader.skip(wire);
  }
  return name;
}

function shapeOf(spec: InputSpec): number[] {
  if (!spec.name) throw invalid('every input needs a name');
  return spec.shape.map((dim) => {
    const value = Number(dim);
    if (!Number.isSafeInteger(value) || value < 0) {
      throw invalid(`input ${spec.name} has shape [${spec.shape.join(', ')}]`);
    }
    return value;
  });
}

function fromContents(spec: InputSpec, shape: number[]): AnyTensor {
  const field = CONTENTS_FIELD[spec.datatype];
  if (!field) {
    if (spec.datatype === 'FP16' || spec.datatype === 'BF16') {
      throw invalid(`input ${spec.name} is ${spec.datatype}: send it in raw_input_contents`);
    }
    throw invalid(`input ${spec.name} has unknown datatype ${JSON.stringify(spec.datatype)}`);
  }
  const values = spec.contents?.[field] ?? [];
  if (values.length === 0) {
    const other = Object.values(CONTENTS_FIELD).find((f) => (spec.contents?.[f]?.length ?? 0) > 0);
    if (other) {
      throw invalid(
        `input ${spec.name} is ${spec.datatype}: its elements belong in ${field}, not ${other}`,
      );
    }
  }
  const data =
    field === 'bytes_contents'
      ? (values as Uint8Array[]).map((bytes, i) => {
          try {
            return utf8.decode(bytes);
          } catch {
            throw invalid(`input ${spec.name} element ${i} is not UTF-8 text`);
          }
        })
      : values;
  return decodeV2Tensor({ name: spec.name, datatype: spec.datatype, shape, data });
}

function hasContents(contents: Contents | undefined): boolean {
  return contents !== undefined && Object.values(contents).some((values) => values.length > 0);
}

/**
 * The ModelInferResponse's bytes: requested outputs (all when none are named) in order, their
 * elements in `raw_output_contents` as Triton answers.
 */
export function encodeGrpcInferResponse(
  request: GrpcInferRequest,
  outputs: NDList,
  model: { name: string; version: string },
): Uint8Array {
  const selected =
    request.outputs.length > 0
      ? request.outputs.map((name) => requestedOutput(outputs, name))
      : outputs.tensors;
  const response = new WireWriter()
    .string(1, model.name)
    .string(2, model.version)
    .string(3, request.id);
  selected.forEach((tensor, i) =>
    response.message(
      5,
      new WireWriter()
        .string(1, tensor.name ?? `output_${i}`)
        .string(2, dtypeNames(tensor.dtype).v2)
        .packed(3, tensor.shape),
    ),
  );
  for (const tensor of selected) response.bytes(6, encodeBinaryTensor(tensor));
  return response.finish();
}
