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

  it('reads a bounded amount: many inputs, a long shape or name are left to the worker', () => {
    const many = new WireWriter();
    for (let i = 0; i < 65; i++) many.message(5, input(`x${i}`, 'FP32', [1]));
    expect(grpcInferLayout(many.finish())).toBeUndefined();
    const rank33 = new WireWriter().message(5, input('x', 'FP32', new Array(33).fill(1)));
    expect(grpcInferLayout(rank33.finish())).toBeUndefined();
    const named = new WireWriter().message(5, input('n'.repeat(300), 'FP32', [1]));
    expect(grpcInferLayout(named.finish())).toBeUndefined();
    // Within the bounds: read.
    const fine = new WireWriter().message(5, input('x', 'FP32', new Array(32).fill(2)));
    expect(grpcInferLayout(fine.finish())?.[0]?.shape).toHaveLength(32);
  });

  it('declares nothing for bytes that are no request or an input without a name', () => {
    expect(grpcInferLayout(new Uint8Array([0x2a, 0xff, 0xff, 0xff]))).toBeUndefined();
    expect(grpcInferLayout(Uint8Array.of(0x0a, 0x05, 0x61))).toBeUndefined();
    const unnamed = new WireWriter().message(5, input('', 'FP32', [1])).finish();
    expect(grpcInferLayout(unnamed)).toBeUndefined();
    expect(grpcInferLayout(new Uint8Array())).toEqual([]);
  });
});

describe('parseGrpcInferRequest with alignInPlace', () => {
  const X = Float32Array.of(1.5, -2, 3);
  const Y = Float64Array.of(0.25, 1e300);

  /** A request with raw x (float32 [3]) and, when asked, y (float64 [2]), `shift` bytes in. */
  function framed(shift: number, withY: boolean): Uint8Array {
    const writer = new WireWriter().string(3, 'req').message(5, input('x', 'FP32', [3]));
    if (withY) writer.message(5, input('y', 'FP64', [2]));
    writer.bytes(7, new Uint8Array(X.buffer));
    if (withY) writer.bytes(7, new Uint8Array(Y.buffer));
    const message = writer.finish();
    const buffer = new Uint8Array(shift + message.byteLength);
    buffer.set(message, shift);
    return buffer.subarray(shift);
  }

  it('moves raw contents off alignment down over the message framing, values intact', () => {
    for (let shift = 0; shift < 8; shift++) {
      const message = framed(shift, false);
      const { inputs, id } = parseGrpcInferRequest(message, { alignInPlace: true });
      const x = inputs.tensors[0]!.data as Float32Array;
      expect(id).toBe('req');
      expect([...x]).toEqual([...X]);
      // A view into the message's own buffer: nothing copied out.
      expect(x.buffer).toBe(message.buffer);
    }
  });

  it('copies an entry that cannot move without reaching the one before, and moves nothing unasked', () => {
    let moved = 0;
    let copied = 0;
    for (let shift = 0; shift < 8; shift++) {
      const message = framed(shift, true);
      const [x, y] = parseGrpcInferRequest(message, { alignInPlace: true }).inputs.tensors;
      expect([...(x!.data as Float32Array)]).toEqual([...X]);
      expect([...(y!.data as Float64Array)]).toEqual([...Y]);
      if ((y!.data as Float64Array).buffer === message.buffer) moved++;
      else copied++;
      const fresh = framed(shift, true);
      const before = fresh.slice();
      const [, plain] = parseGrpcInferRequest(fresh).inputs.tensors;
      expect([...(plain!.data as Float64Array)]).toEqual([...Y]);
      expect(fresh).toEqual(before);
    }
    // y sits two bytes of framing above x's data: some shifts leave it room, others do not.
    expect(moved).toBeGreaterThan(0);
    expect(copied).toBeGreaterThan(0);
  });
});
