import { describe, expect, it } from 'vitest';
import { attr } from './attributes.js';
import { GraphBuilder } from './graph-builder.js';
import { onnx } from './onnx-proto.js';
import { decodeOnnxModel, encodeOnnxModel } from './save-model.js';

describe('GraphBuilder', () => {
  it('round-trips a graph through protobuf with dims, dtypes, attributes and initializers', () => {
    const g = new GraphBuilder('demo');
    g.input('x', 'float16', ['batch', 8]);
    const w = g.initializer('w', 'int64', [2], BigInt64Array.of(3n, -4n));
    const labels = g.initializer('labels', 'string', [2], ['a', 'β']);
    g.op('Softmax', ['x'], { axis: attr.int(-1) }, { output: 'y' });
    g.op('LayerNormalization', ['x', w, labels], {
      epsilon: attr.float(1),
      perm: attr.ints([0, 1]),
    });
    g.output('y', 'float16', ['batch', 8]);

    const model = decodeOnnxModel(encodeOnnxModel(g.toModel({ metadata: { author: 'kiln' } })));
    const graph = model.graph!;
    expect(Number(model.irVersion)).toBe(8);
    expect(model.opsetImport?.map((o) => [o.domain, Number(o.version)])).toEqual([['', 17]]);
    expect(model.metadataProps).toEqual([
      expect.objectContaining({ key: 'author', value: 'kiln' }),
    ]);
    const input = graph.input![0]!.type!.tensorType!;
    expect(input.elemType).toBe(onnx.TensorProto.DataType.FLOAT16);
    expect(input.shape!.dim!.map((d) => d.dimParam || Number(d.dimValue))).toEqual(['batch', 8]);

    const [wProto, labelsProto] = graph.initializer!;
    const raw = wProto!.rawData!;
    expect(Array.from(new BigInt64Array(Uint8Array.from(raw).buffer))).toEqual([3n, -4n]);
    expect(labelsProto!.stringData!.map((b) => new TextDecoder().decode(b))).toEqual(['a', 'β']);

    const [softmax, norm] = graph.node!;
    expect(softmax!.output).toEqual(['y']);
    expect(Number(softmax!.attribute![0]!.i)).toBe(-1);
    const epsilon = norm!.attribute!.find((a) => a.name === 'epsilon')!;
    // epsilon = 1 must stay a FLOAT attribute, not become an INT.
    expect(epsilon.type).toBe(onnx.AttributeProto.AttributeType.FLOAT);
    expect(epsilon.f).toBe(1);
    expect(norm!.output![0]).not.toBe('y');
  });

  it('refuses duplicate names, bad dimensions and data that does not fit the dims', () => {
    const g = new GraphBuilder('bad');
    g.input('x', 'float32', [1]);
    expect(() => g.input('x', 'float32', [1])).toThrow(/already has a value named x/);
    expect(() => g.input('y', 'float32', [-1])).toThrow(/dimension -1/);
    expect(() => g.initializer('w', 'float32', [2, 2], new Float32Array(3))).toThrow(
      /need 4 values, got 3/,
    );
  });

  it('makes fresh names that never collide with declared ones', () => {
    const g = new GraphBuilder('names');
    g.input('relu_0', 'float32', [1]);
    const out = g.op('Relu', ['relu_0']);
    expect(out).not.toBe('relu_0');
    expect(g.fresh('relu')).not.toBe(out);
  });
});
