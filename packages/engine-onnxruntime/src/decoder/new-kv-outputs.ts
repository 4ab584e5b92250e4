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
 * it: the Concat's second input becomes an output through an `Identity`. Optimum's merged
 * decoder makes its presents in an `If` on `use_cache_branch`: there the branch with a past
 * taps its Concat the same way, and the branch without one (which never reads the past) hands
 * back its present itself, every position of which is new. Anything else (a fused attention
 * op, say): undefined. A protobuf wire edit of ModelProto.graph (7): nodes (1) and outputs
 * (12) are appended, and an `If` node gets outputs (2) and its branches (attribute 5, graph
 * 6) theirs; nothing else is decoded or moved. The new model comes in pieces, to be written
 * one after another: most of them view `model`'s bytes.
 */
export function withNewKvOutputs(model: Uint8Array): Uint8Array[] | undefined {
  const graphs = fields(model, 0, model.length, 7);
  if (graphs.length !== 1) return undefined;
  const graph = graphs[0]!;
  const inputs = new Map(
    fields(model, graph.start, graph.end, 11).map((i) => [nameOf(model, i), i]),
  );
  const presents = fields(model, graph.start, graph.end, 12)
    .map((o) => nameOf(model, o))
    .filter((name) => PRESENT.test(name));
  if (presents.length === 0) return undefined;
  const producers = producersOf(model, graph);
  const added: Uint8Array[] = [];
  /** Per If node: what each of its presents adds. */
  const taps = new Map<Span, Tap[]>();
  for (const present of presents) {
    const [, layer, kind] = PRESENT.exec(present)!;
    const past = inputs.get(`past_key_values.${layer}.${kind}`);
    const node = producers.get(present);
    const type = past && fields(model, past.start, past.end, 2)[0];
    if (!past || !node || !type) return undefined;
    const name = newKvOutputName(Number(layer), kind as 'key' | 'value');
    if (opOf(model, node) === 'If') {
      const outputs = fields(model, node.start, node.end, 2).map((o) => textOf(model, o));
      const tap = { index: outputs.indexOf(present), past: nameOf(model, past), name };
      taps.set(node, [...(taps.get(node) ?? []), tap]);
    } else {
      const fresh = freshInput(model, node, nameOf(model, past));
      if (fresh === undefined) return undefined;
      added.push(identity(fresh, name));
    }
    added.push(encodeField(12, concat([encodeField(1, name), elementTypeOnly(model, type)])));
  }
  const edits: Edit[] = [];
  for (const [node, list] of taps) {
    const edited = tappedIf(model, node, list);
    if (!edited) return undefined;
    edits.push({ span: node, field: 1, pieces: edited });
  }
  // In pieces that view the model's bytes: a model with its weights inside is not copied.
  const body = spliced(model, graph, edits, [concat(added)]);
  return [
    model.subarray(0, graph.tagStart),
    encodeVarint(7 * 8 + 2),
    encodeVarint(lengthOf(body)),
    ...body,
    model.subarray(graph.end),
  ];
}

/** A present an `If` node makes: its place among the node's outputs, its past, its new output. */
interface Tap {
  readonly index: number;
  readonly past: string;
  readonly name: string;
}

/** A field of a message replaced: its span, its number and its new content. */
interface Edit {
  readonly span: Span;
  readonly field: number;
  readonly pieces: readonly Uint8Array[];
}

/**
 * The If node `node` with an output per tap, each branch (then_branch, else_branch) handing
 * it back: the new positions of the branch's Concat with the past, or, in a branch that never
 * reads the past, its present itself. Undefined where a branch is neither.
 */
function tappedIf(model: Uint8Array, node: Span, taps: readonly Tap[]): Uint8Array[] | undefined {
  const edits: Edit[] = [];
  for (const attribute of fields(model, node.start, node.end, 5)) {
    const [label] = fields(model, attribute.start, attribute.end, 1);
    const branchName = label && textOf(model, label);
    if (branchName !== 'then_branch' && branchName !== 'else_branch') continue;
    const [branch] = fields(model, attribute.start, attribute.end, 6);
    if (!branch) return undefined;
    const outputs = fields(model, branch.start, branch.end, 12);
    const producers = producersOf(model, branch);
    const reads = new Set(
      fields(model, branch.start, branch.end, 1).flatMap((n) =>
        fields(model, n.start, n.end, 1).map((i) => textOf(model, i)),
      ),
    );
    const added: Uint8Array[] = [];
    for (const tap of taps) {
      const output = outputs[tap.index];
      if (!output) return undefined;
      const present = nameOf(model, output);
      const producer = producers.get(present);
      const fresh = producer && freshInput(model, producer, tap.past);
      if (fresh === undefined && reads.has(tap.past)) return undefined;
      const name = `${tap.name}.${branchName}`;
      const [type] = fields(model, output.start, output.end, 2);
      added.push(
        identity(fresh ?? present, name),
        encodeField(
          12,
          concat([encodeField(1, name), ...(type ? [elementTypeOnly(model, type)] : [])]),
        ),
      );
    }
    const graphPieces = spliced(model, branch, [], [concat(added)]);
    edits.push({
      span: attribute,
      field: 5,
      pieces: spliced(model, attribute, [{ span: branch, field: 6, pieces: graphPieces }], []),
    });
  }
  if (edits.length !== 2) return undefined;
  return spliced(
    model,
    node,
    edits,
    taps.map((tap) => encodeField(2, tap.name)),
  );
}

/**
 * The content of the message `span` with `edits` made (each field re-encoded around its new
 * pieces) and `appended` after it, in pieces that view `model` where nothing changed.
 */
function spliced(
  model: Uint8Array,
  span: Span,
  edits: readonly Edit[],
  appended: readonly Uint8Array[],
): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  let at = span.start;
  for (const edit of [...edits].sort((a, b) => a.span.tagStart - b.span.tagStart)) {
    pieces.push(model.subarray(at, edit.span.tagStart));
    pieces.push(encodeVarint(edit.field * 8 + 2), encodeVarint(lengthOf(edit.pieces)));
    pieces.push(...edit.pieces);
    at = edit.span.end;
  }
  pieces.push(model.subarray(at, span.end), ...appended);
  return pieces;
}

function lengthOf(pieces: readonly Uint8Array[]): number {
  return pieces.reduce((n, piece) => n + piece.length, 0);
}

/** Each output of a graph's nodes (GraphProto.node 1 → NodeProto.output 2), by its producer. */
function producersOf(model: Uint8Array, graph: Span): Map<string, Span> {
  const producers = new Map<string, Span>();
  for (const node of fields(model, graph.start, graph.end, 1))
    for (const output of fields(model, node.start, node.end, 2))
      producers.set(textOf(model, output), node);
  return producers;
}

function opOf(model: Uint8Array, node: Span): string | undefined {
  const [op] = fields(model, node.start, node.end, 4);
  return op && textOf(model, op);
}

/** A message's `name` field (1), as ValueInfoProto and NodeProto have it. */
function nameOf(model: Uint8Array, message: Span): string {
  const [name] = fields(model, message.start, message.end, 1);
  return name ? textOf(model, name) : '';
}

/** A NodeProto field: `output` = Identity(`input`). */
function identity(input: string, output: string): Uint8Array {
  return encodeField(
    1,
    concat([
      encodeField(1, input),
      encodeField(2, output),
      encodeField(3, output),
      encodeField(4, 'Identity'),
    ]),
  );
}

/** The new positions' input of a `Concat(past, new)` on axis 2 (or -2) that makes a present. */
function freshInput(model: Uint8Array, node: Span, past: string): string | undefined {
  if (opOf(model, node) !== 'Concat') return undefined;
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
