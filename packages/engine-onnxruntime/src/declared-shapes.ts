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

interface Span {
  readonly start: number;
  readonly end: number;
}

/** The length-delimited fields numbered `wanted` between start and end, in order. */
function fields(bytes: Uint8Array, start: number, end: number, wanted: number): Span[] {
  const found: Span[] = [];
  let at = start;
  while (at < end) {
    const tag = varint(bytes, at, end);
    at = tag.next;
    const wire = tag.value % 8;
    const field = Math.floor(tag.value / 8);
    if (wire === 0) at = varint(bytes, at, end).next;
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint(bytes, at, end);
      const span = { start: length.next, end: length.next + length.value };
      if (span.end > end) throw new Error('truncated protobuf field');
      if (field === wanted) found.push(span);
      at = span.end;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
  }
  return found;
}

function varint(bytes: Uint8Array, at: number, end: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = at; i < end && i < at + 10; i++) {
    const byte = bytes[i]!;
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if (byte < 0x80) return { value, next: i + 1 };
  }
  throw new Error('malformed protobuf varint');
}
