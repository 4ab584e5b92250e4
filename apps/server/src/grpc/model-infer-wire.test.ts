import { describe, expect, it } from 'vitest';
import {
  KilnError,
  KilnErrorCode,
  NDList,
  Tensor,
  encodeGrpcInferResponse,
  grpcInferTarget,
  parseGrpcInferRequest,
} from '@kiln/core';
import { loadInferencePackage } from './proto.js';

// Kiln reads ModelInferRequests and writes ModelInferResponses on the wire itself (where the
// model runs); protobufjs, which grpc-js clients use, is the reference for both directions.
const codec = (
  loadInferencePackage().GRPCInferenceService as unknown as {
    service: {
      ModelInfer: {
        requestSerialize(message: unknown): Buffer;
        responseDeserialize(bytes: Buffer): Record<string, unknown>;
      };
    };
  }
).service.ModelInfer;

const encode = (message: Record<string, unknown>) => codec.requestSerialize(message);

function failure(read: () => unknown): KilnError {
  try {
    read();
  } catch (error) {
    expect(error).toBeInstanceOf(KilnError);
    return error as KilnError;
  }
  throw new Error('expected the message to be refused');
}

describe('ModelInferRequest bytes', () => {
  it('name their model without their tensors being read', () => {
    const bytes = encode({
      id: 'r1',
      raw_input_contents: [Buffer.alloc(64)],
      model_version: '3',
      model_name: 'resnet',
    });
    expect(grpcInferTarget(bytes)).toEqual({ model: 'resnet', version: '3' });
  });

  it('decode every typed contents field as protobufjs encodes it', () => {
    const request = parseGrpcInferRequest(
      encode({
        model_name: 'm',
        id: 'r1',
        parameters: { priority: { int64_param: 3 } },
        inputs: [
          { name: 'b', datatype: 'BOOL', shape: [2], contents: { bool_contents: [true, false] } },
          { name: 'i', datatype: 'INT32', shape: [2], contents: { int_contents: [-1, 7] } },
          { name: 'l', datatype: 'INT64', shape: [1], contents: { int64_contents: ['-2'] } },
          { name: 'u', datatype: 'UINT32', shape: [1], contents: { uint_contents: [4e9] } },
          {
            name: 'ul',
            datatype: 'UINT64',
            shape: [1],
            contents: { uint64_contents: ['18446744073709551615'] },
          },
          { name: 'f', datatype: 'FP32', shape: [1, 2], contents: { fp32_contents: [1.5, -2] } },
          { name: 'd', datatype: 'FP64', shape: [1], contents: { fp64_contents: [0.1] } },
          {
            name: 's',
            datatype: 'BYTES',
            shape: [1],
            contents: { bytes_contents: [Buffer.from('hé')] },
          },
        ],
        outputs: [{ name: 'y' }, { name: 'z' }],
      }),
    );
    expect(request.id).toBe('r1');
    expect(request.outputs).toEqual(['y', 'z']);
    expect(
      request.inputs.tensors.map((t) => [t.name, t.dtype, t.shape, Array.from(t.data as never)]),
    ).toEqual([
      ['b', 'bool', [2], [1, 0]],
      ['i', 'int32', [2], [-1, 7]],
      ['l', 'int64', [1], [-2n]],
      ['u', 'uint32', [1], [4e9]],
      ['ul', 'uint64', [1], [2n ** 64n - 1n]],
      ['f', 'float32', [1, 2], [1.5, -2]],
      ['d', 'float64', [1], [0.1]],
      ['s', 'string', [1], ['hé']],
    ]);
  });

  it('decode repeated fields unpacked too, as proto2 writers send them', () => {
    const input = [0x0a, 1, 0x78, 0x12, 5, ...Buffer.from('UINT8'), 0x18, 2];
    const contents = [0x2a, 4, 0x20, 7, 0x20, 8]; // uint_contents 7, then 8
    const bytes = Uint8Array.from([0x2a, input.length + contents.length, ...input, ...contents]);
    const x = parseGrpcInferRequest(bytes).inputs.get(0);
    expect([x.name, x.shape, Array.from(x.data as Uint8Array)]).toEqual(['x', [2], [7, 8]]);
  });

  it('view raw_input_contents in place', () => {
    const bytes = encode({
      inputs: [{ name: 'x', datatype: 'UINT8', shape: [3] }],
      raw_input_contents: [Buffer.from([7, 8, 9])],
    });
    const x = parseGrpcInferRequest(bytes).inputs.get(0).data as Uint8Array;
    expect(Array.from(x)).toEqual([7, 8, 9]);
    expect(x.buffer).toBe(bytes.buffer);
  });

  it('that are no such message are the client’s error, naming the problem', () => {
    const valid = encode({
      model_name: 'm',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1] }],
      raw_input_contents: [Buffer.alloc(4)],
    });
    for (const bytes of [
      valid.subarray(0, valid.byteLength - 1), // a field running past the end
      Buffer.from([0xff, 0xff, 0xff, 0xff]), // a varint running past the end
      Buffer.from('not a protobuf message'), // wire type 6
      Buffer.from([0x0d, 0, 0, 0, 0]), // model_name as a 32-bit value
    ]) {
      const error = failure(() => {
        grpcInferTarget(bytes);
        return parseGrpcInferRequest(bytes);
      });
      expect(error.code, bytes.toString('hex')).toBe(KilnErrorCode.InvalidInput);
      expect(error.message).toMatch(/^the ModelInfer request is not a valid protobuf message: /);
    }
  });

  it('with inconsistent tensors are refused as Triton refuses them', () => {
    const refused = (message: Record<string, unknown>) =>
      failure(() => parseGrpcInferRequest(encode(message))).message;
    const x = { name: 'x', datatype: 'FP32', shape: [1] };
    expect(refused({ inputs: [x, x], raw_input_contents: [Buffer.alloc(4)] })).toMatch(
      /raw_input_contents has 1 entries for 2 inputs/,
    );
    expect(
      refused({
        inputs: [{ ...x, contents: { fp32_contents: [1] } }],
        raw_input_contents: [Buffer.alloc(4)],
      }),
    ).toMatch(/both contents and raw_input_contents/);
    expect(refused({ inputs: [{ ...x, contents: { int_contents: [1] } }] })).toMatch(
      /belong in fp32_contents, not int_contents/,
    );
    expect(refused({ inputs: [{ ...x, name: '' }] })).toMatch(/every input needs a name/);
    expect(refused({ inputs: [{ ...x, shape: [-1] }] })).toMatch(/has shape \[-1\]/);
  });
});

describe('ModelInferResponse bytes', () => {
  it('decode with protobufjs to the requested outputs, raw, in order', () => {
    const request = parseGrpcInferRequest(encode({ id: 'r1', outputs: [{ name: 'b' }] }));
    const outputs = new NDList([
      new Tensor('float32', Float32Array.of(1, 2), [1, 2], 'a'),
      new Tensor('int64', BigInt64Array.of(-5n), [1], 'b'),
    ]);
    const bytes = encodeGrpcInferResponse(request, outputs, { name: 'm', version: '2' });
    const response = codec.responseDeserialize(Buffer.from(bytes));
    expect(response).toMatchObject({
      model_name: 'm',
      model_version: '2',
      id: 'r1',
      outputs: [{ name: 'b', datatype: 'INT64', shape: ['1'] }],
    });
    const raw = (response.raw_output_contents as Buffer[])[0]!;
    expect(raw.readBigInt64LE(0)).toBe(-5n);

    const all = codec.responseDeserialize(
      Buffer.from(
        encodeGrpcInferResponse(parseGrpcInferRequest(encode({})), outputs, {
          name: 'm',
          version: '',
        }),
      ),
    );
    expect((all.outputs as { name: string }[]).map((o) => o.name)).toEqual(['a', 'b']);
    expect(
      failure(() =>
        encodeGrpcInferResponse({ ...request, outputs: ['c'] }, outputs, {
          name: 'm',
          version: '',
        }),
      ).message,
    ).toMatch(/unknown output c \(outputs: a, b\)/);
  });
});
