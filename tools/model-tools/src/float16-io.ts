import type { OnnxModel } from './graph-builder.js';
import { onnx } from './onnx-proto.js';

const FLOAT = onnx.TensorProto.DataType.FLOAT;
const FLOAT16 = onnx.TensorProto.DataType.FLOAT16;

/**
 * The model with float16 where `float16` names a float32 input or output, as an fp16 export
 * takes and gives them (a transformers.js folder's `model_fp16.onnx`: pasts, presents and
 * logits in float16), computing inside in float32 as before: each such input is cast up as it
 * comes in and each output cast down as it goes out.
 */
export function float16IoModel(model: OnnxModel, float16: (name: string) => boolean): OnnxModel {
  const graph = model.graph!;
  const nodes = [...(graph.node ?? [])];
  const casts: typeof nodes = [];
  const widened = new Map<string, string>();
  for (const input of graph.input ?? []) {
    if (!float16(input.name!) || !setElemType(input, FLOAT16)) continue;
    widened.set(input.name!, `${input.name}/float32`);
    casts.push(cast(input.name!, `${input.name}/float32`, FLOAT));
  }
  const narrowed = new Map<string, string>();
  for (const output of graph.output ?? []) {
    if (!float16(output.name!) || !setElemType(output, FLOAT16)) continue;
    narrowed.set(output.name!, `${output.name}/float32`);
  }
  const renamed = nodes.map((node) => ({
    ...node,
    input: (node.input ?? []).map((name) => widened.get(name) ?? name),
    output: (node.output ?? []).map((name) => narrowed.get(name) ?? name),
  }));
  // An output also read inside the graph is read as its float32 self.
  for (const node of renamed) node.input = node.input.map((name) => narrowed.get(name) ?? name);
  for (const [name, inner] of narrowed) casts.push(cast(inner, name, FLOAT16));
  return {
    ...model,
    graph: {
      ...graph,
      node: [...casts.slice(0, widened.size), ...renamed, ...casts.slice(widened.size)],
    },
  };
}

function setElemType(
  value: { type?: { tensorType?: { elemType?: number | null } | null } | null },
  type: number,
): boolean {
  const tensor = value.type?.tensorType;
  if (!tensor || tensor.elemType !== FLOAT) return false;
  tensor.elemType = type;
  return true;
}

function cast(from: string, to: string, type: number) {
  return {
    opType: 'Cast',
    name: `cast ${from}`,
    input: [from],
    output: [to],
    attribute: [{ name: 'to', type: onnx.AttributeProto.AttributeType.INT, i: type }],
  };
}
