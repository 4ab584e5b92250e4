import { describe, expect, it } from 'vitest';
import { grpcInferLayout, parseGrpcInferRequest } from './grpc-infer.js';
import { WireWriter } from './protobuf-wire.js';

/** An InferInputTensor: name, datatype, shape, and typed contents when given. */
function input(name: string, datatype: string, shape: number[], fp32?: number[]): WireWriter {
  const tensor = new WireWriter().string(1, name).string(2, datatype).packed(3, shape);
  if (fp32) {
    const values = new Uint8Array(new Float32Array(fp32).buffer);
    tensor.message(5, new WireWriter().bytes(6, values));
  }
  return tensor;
}

describe('grpcInferLayout', () => {
  it("reads each input's name, datatype and shape, skipping raw and typed contents", () => {
    const raw = new WireWriter()
      .string(1, 'm')
      .message(5, input('x', 'FP32', [2, 3]))
      .message(5, input('mask', 'INT64', [2, 3]))
      .bytes(7, new Uint8Array(24))
      .bytes(7, new Uint8Array(48))
      .finish();
    expect(grpcInferLayout(raw)).toEqual([
      { name: 'x', datatype: 'FP32', shape: [2, 3] },
      { name: 'mask', datatype: 'INT64', shape: [2, 3] },
    ]);
    const typed = new WireWriter().message(5, input('x', 'FP32', [1, 2], [1, 2])).finish();
    expect(grpcInferLayout(typed)).toEqual([{ name: 'x', datatype: 'FP32', shape: [1, 2] }]);
    // What the worker decodes says the same.
    expect(parseGrpcInferRequest(typed).inputs.tensors[0]!.shape).toEqual([1, 2]);
  });

  it('declares nothing for bytes that are no request or an input without a name', () => {
    expect(grpcInferLayout(new Uint8Array([0x2a, 0xff, 0xff, 0xff]))).toBeUndefined();
    expect(grpcInferLayout(Uint8Array.of(0x0a, 0x05, 0x61))).toBeUndefined();
    const unnamed = new WireWriter().message(5, input('', 'FP32', [1])).finish();
    expect(grpcInferLayout(unnamed)).toBeUndefined();
    expect(grpcInferLayout(new Uint8Array())).toEqual([]);
  });
});
