import { isAbsolute, normalize } from 'node:path';
import {
  concat,
  encodeField,
  encodeVarint,
  fields,
  intField,
  type Span,
  textOf,
} from '../protobuf-wire.js';

/** Graph outputs Kiln adds to a decoder, hidden from its description: see withNewKvOutputs. */
export const NEW_KV_OUTPUT_PREFIX = 'kiln_new_kv.';

/** The added output holding the keys or values one run computed for `layer`'s new positions. */
export function newKvOutputName(layer: number, kind: 'key' | 'value'): string {
  return `${NEW_KV_OUTPUT_PREFIX}${layer}.${kind}`;
}

const PRESENT = /^present\.(\d+)\.(key|value)$/;

/**
 * The decoder with one more output beside each `present.{layer}.{kind}`: the keys or values
 * of the positions this run fed alone ([batch, heads, sequence, head]), named by
 * newKvOutputName. onnxruntime-node copies every output it hands back into a new
 * `ArrayBuffer`, and a present holds the whole past again (tens of MB a step for a batch of
 * long sequences: ~40 % of a decode step's time). A caller that keeps the past itself
 * fetches these instead and appends them.
 *
 * Applies where each present is a `Concat` of its `past_key_values.*` input and the new
 * positions on the sequence axis, as the Hugging Face exports and Kiln's own decoders make
 * it: the Concat's second input becomes an output through an `Identity`. Anything else (a
 * fused attention op, a merged decoder's `If` branches): undefined. A protobuf wire edit of ModelProto.graph (7):
 * nodes (1) and outputs (12) are appended; nothing else is decoded or moved. The new model
 * comes in pieces, to be written one after another: most of them view `model`'s bytes.
 */
export function withNewKvOutputs(model: Uint8Array): Uint8Array[] | undefined {
  const graphs = fields(model, 0, model.length, 7);
  if (graphs.length !== 1) return undefined;
  const graph = graphs[0]!;
  const nameOf = (info: Span) => {
    const [name] = fields(model, info.start, info.end, 1);
    return name ? textOf(model, name) : '';
  };
  const inputs = new Map(fields(model, graph.start, graph.end, 11).map((i) => [nameOf(i), i]));
  const presents = fields(model, graph.start, graph.end, 12)
    .map(nameOf)
    .filter((name) => PRESENT.test(name));
  if (presents.length === 0) return undefined;
  const producers = new Map<string, Span>();
  for (const node of fields(model, graph.start, graph.end, 1)) {
    for (const output of fields(model, node.start, node.end, 2)) {
      const name = textOf(model, output);
      if (PRESENT.test(name)) producers.set(name, node);
    }
  }
  const added: Uint8Array[] = [];
  for (const present of presents) {
    const [, layer, kind] = PRESENT.exec(present)!;
    const past = inputs.get(`past_key_values.${layer}.${kind}`);
    const node = producers.get(present);
    if (!past || !node) return undefined;
    const fresh = freshInput(model, node, nameOf(past));
    const type = fields(model, past.start, past.end, 2)[0];
    if (fresh === undefined || !type) return undefined;
    const name = newKvOutputName(Number(layer), kind as 'key' | 'value');
    added.push(
      encodeField(
        1,
        concat([
          encodeField(1, fresh),
          encodeField(2, name),
          encodeField(3, name),
          encodeField(4, 'Identity'),
        ]),
      ),
      encodeField(12, concat([encodeField(1, name), elementTypeOnly(model, type)])),
    );
  }
  const addedBytes = concat(added);
  // In pieces that view the model's bytes: a model with its weights inside is not copied.
  return [
    model.subarray(0, graph.tagStart),
    encodeVarint(7 * 8 + 2),
    encodeVarint(graph.end - graph.start + addedBytes.length),
    model.subarray(graph.start, graph.end),
    addedBytes,
    model.subarray(graph.end),
  ];
}

/** The new positions' input of a `Concat(past, new)` on axis 2 (or -2) that makes a present. */
function freshInput(model: Uint8Array, node: Span, past: string): string | undefined {
  const [op] = fields(model, node.start, node.end, 4);
  if (!op || textOf(model, op) !== 'Concat') return undefined;
  const inputs = fields(model, node.start, node.end, 1).map((s) => textOf(model, s));
  if (inputs.length !== 2 || inputs[0] !== past) return undefined;
  for (const attribute of fields(model, node.start, node.end, 5)) {
    const [name] = fields(model, attribute.start, attribute.end, 1);
    if (name && textOf(model, name) === 'axis') {
      const axis = intField(model, attribute.start, attribute.end, 3);
      return axis === 2n || axis === -2n ? inputs[1] : undefined;
    }
  }
  return undefined;
}

/** The past's TypeProto reduced to its tensor element type (the new positions' shape differs). */
function elementTypeOnly(model: Uint8Array, type: Span): Uint8Array {
  const [tensor] = fields(model, type.start, type.end, 1);
  const elementType = tensor ? intField(model, tensor.start, tensor.end, 1) : undefined;
  return encodeField(2, encodeField(1, encodeField(1, Number(elementType ?? 1n))));
}

/**
 * The files, relative to the model's folder, that its initializers (GraphProto.initializer 5)
 * keep their data in: TensorProto.external_data (13) entries whose key (1) is `location`;
 * undefined when one would leave the folder.
 */
export function externalDataFiles(model: Uint8Array): string[] | undefined {
  const files = new Set<string>();
  for (const graph of fields(model, 0, model.length, 7)) {
    for (const tensor of fields(model, graph.start, graph.end, 5)) {
      for (const entry of fields(model, tensor.start, tensor.end, 13)) {
        const [key] = fields(model, entry.start, entry.end, 1);
        const [value] = fields(model, entry.start, entry.end, 2);
        if (key && value && textOf(model, key) === 'location') files.add(textOf(model, value));
      }
    }
  }
  const inside = (file: string) =>
    file !== '' && !isAbsolute(file) && !normalize(file).split(/[\\/]/).includes('..');
  return [...files].every(inside) ? [...files] : undefined;
}
