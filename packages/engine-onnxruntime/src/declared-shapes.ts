import { fields } from './protobuf-wire.js';

/**
 * Which graph inputs and outputs of an ONNX model declare no shape at all. ONNX Runtime
 * reports such a tensor with the shape [] — the same as a scalar — so Kiln reads the model's
 * own declarations to tell "any shape" from "0-d".
 *
 * A protobuf wire scan of ModelProto.graph (7) → GraphProto.input (11) / output (12) →
 * ValueInfoProto { name (1), type (2) → TypeProto.tensor_type (1) → shape (2) }: everything
 * else, initializers included, is skipped without being decoded.
 */
export function namesWithoutShape(model: Uint8Array): Set<string> {
  const names = new Set<string>();
  for (const graph of fields(model, 0, model.length, 7)) {
    for (const field of [11, 12]) {
      for (const info of fields(model, graph.start, graph.end, field)) {
        const [name] = fields(model, info.start, info.end, 1);
        const [type] = fields(model, info.start, info.end, 2);
        const [tensor] = type ? fields(model, type.start, type.end, 1) : [];
        if (!name || !tensor) continue;
        if (fields(model, tensor.start, tensor.end, 2).length === 0)
          names.add(new TextDecoder().decode(model.subarray(name.start, name.end)));
      }
    }
  }
  return names;
}
