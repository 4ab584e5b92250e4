import { existsSync } from 'node:fs';
import {
  copyFile,
  mkdir,
  mkdtemp,
  readFile,
  readdir,
  rm,
  stat,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  GraphBuilder,
  MODEL_FILE,
  attr,
  decodeOnnxModel,
  encodeOnnxModel,
  gptDecoderModel,
  tinyModel,
  writeModelFolder,
} from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadOrt } from '../ort-loader.js';
import { loadOrtStepDecoder } from './ort-step-decoder.js';
import { probeOrt } from '../probe.js';
import { loadOrtModel } from '../test-support/load.js';
import { servedModelFile } from './new-kv-model-file.js';
import { newKvOutputName, withNewKvOutputs } from './new-kv-outputs.js';

const { run } = await checkEngine('OnnxRuntime', probeOrt);

const LAYERS = 2;
const HEADS = 4;
const HEAD = 8;

let root: string;
let decoder: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'kiln-new-kv-'));
  const model = await gptDecoderModel(join(root, 'gpt'), {
    layers: LAYERS,
    hidden: HEADS * HEAD,
    heads: HEADS,
    maxLen: 64,
  });
  decoder = join(model.dir, MODEL_FILE);
});
afterAll(() => rm(root, { recursive: true, force: true }));

const BATCH = 2;
const FRESH = 3;
type Ort = Awaited<ReturnType<typeof loadOrt>>;
type OrtSession = Awaited<ReturnType<Ort['InferenceSession']['create']>>;
type OrtValues = Awaited<ReturnType<OrtSession['run']>>;

/** Runs two rows of three new tokens after `past` positions of made-up keys and values. */
async function runAfter(
  session: OrtSession,
  past: number,
  extra: Record<string, InstanceType<Ort['Tensor']>> = {},
): Promise<OrtValues> {
  const ort = await loadOrt();
  const int64 = (values: number[], dims: number[]) =>
    new ort.Tensor('int64', BigInt64Array.from(values.map(BigInt)), dims);
  const feeds: Record<string, InstanceType<Ort['Tensor']>> = {
    input_ids: int64([1, 2, 3, 4, 5, 6], [BATCH, FRESH]),
    position_ids: int64(
      [0, 1, 2, 0, 1, 2].map((p) => p + past),
      [BATCH, FRESH],
    ),
    attention_mask: int64(Array(BATCH * (past + FRESH)).fill(1), [BATCH, past + FRESH]),
    ...extra,
  };
  for (let l = 0; l < LAYERS; l++)
    for (const kind of ['key', 'value'])
      feeds[`past_key_values.${l}.${kind}`] = new ort.Tensor(
        'float32',
        Float32Array.from({ length: BATCH * HEADS * past * HEAD }, (_, i) => Math.sin(i)),
        [BATCH, HEADS, past, HEAD],
      );
  return session.run(feeds);
}

/** Each row and head's added new positions are its present's last ones, bit for bit. */
function expectNewPositionsOfPresents(out: OrtValues, past: number): void {
  for (let l = 0; l < LAYERS; l++) {
    for (const kind of ['key', 'value'] as const) {
      const present = out[`present.${l}.${kind}`]!.data as Float32Array;
      const added = out[newKvOutputName(l, kind)]!.data as Float32Array;
      for (let rowHead = 0; rowHead < BATCH * HEADS; rowHead++)
        expect([...added.subarray(rowHead * FRESH * HEAD, (rowHead + 1) * FRESH * HEAD)]).toEqual([
          ...present.subarray(
            (rowHead * (past + FRESH) + past) * HEAD,
            (rowHead + 1) * (past + FRESH) * HEAD,
          ),
        ]);
    }
  }
}

describe('withNewKvOutputs', () => {
  it.skipIf(!run)('adds an output beside each present with the positions the run fed', async () => {
    const ort = await loadOrt();
    const model = Buffer.concat(withNewKvOutputs(await readFile(decoder))!);
    const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1 });
    try {
      const names = Array.from({ length: LAYERS }, (_, l) =>
        (['key', 'value'] as const).map((kind) => newKvOutputName(l, kind)),
      ).flat();
      expect(session.outputNames).toEqual(expect.arrayContaining(names));
      const out = await runAfter(session, 5);
      expect(out[newKvOutputName(0, 'key')]!.dims).toEqual([BATCH, HEADS, FRESH, HEAD]);
      expectNewPositionsOfPresents(out, 5);
    } finally {
      await session.release();
    }
  });

  it('leaves alone a model whose presents are not a Concat of the past and the new positions', async () => {
    expect(
      withNewKvOutputs(await readFile(join(await tinyModel(join(root, 'tiny')), MODEL_FILE))),
    ).toBeUndefined();
    const g = new GraphBuilder('fused');
    g.input('past_key_values.0.key', 'float32', ['batch', 2, 'past', 4]);
    g.input('x', 'float32', ['batch', 2, 1, 4]);
    // The past and the new positions joined the other way round.
    g.op(
      'Concat',
      ['x', 'past_key_values.0.key'],
      { axis: attr.int(2) },
      { output: 'present.0.key' },
    );
    g.output('present.0.key', 'float32', ['batch', 2, 'total', 4]);
    const dir = await writeModelFolder(join(root, 'reversed'), g.toModel());
    expect(withNewKvOutputs(await readFile(join(dir, MODEL_FILE)))).toBeUndefined();
  });
});

/**
 * `dir`'s decoder as Optimum merges it: one `If` on `use_cache_branch` whose branch with a
 * past is the decoder as it is, and whose branch without one never reads the past (each
 * present is its new positions alone, the Concat with the past an Identity of them).
 */
async function mergedDecoder(from: string, dir: string): Promise<string> {
  const model = decodeOnnxModel(await readFile(join(from, MODEL_FILE)));
  const graph = model.graph!;
  const withoutPast = (graph.node ?? []).map((node) =>
    node.opType === 'Concat' && /^present\./.test(node.output?.[0] ?? '')
      ? { ...node, opType: 'Identity', input: [node.input![1]!], attribute: [] }
      : node,
  );
  const branch = (name: string, node: typeof withoutPast) => ({ name, node, output: graph.output });
  model.graph = {
    name: graph.name,
    input: [
      ...(graph.input ?? []),
      {
        name: 'use_cache_branch',
        type: { tensorType: { elemType: 9, shape: { dim: [{ dimValue: 1 }] } } },
      },
    ],
    initializer: graph.initializer,
    output: graph.output,
    node: [
      {
        opType: 'If',
        name: 'optimum::if',
        input: ['use_cache_branch'],
        output: (graph.output ?? []).map((o) => o.name!),
        attribute: [
          { name: 'then_branch', type: 5, g: branch('with_past', graph.node ?? []) },
          { name: 'else_branch', type: 5, g: branch('without_past', withoutPast) },
        ],
      },
    ],
  };
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, MODEL_FILE), encodeOnnxModel(model));
  for (const file of ['config.json', 'vocab.json'])
    await copyFile(join(from, file), join(dir, file));
  return dir;
}

describe.skipIf(!run)('a merged decoder', () => {
  it('taps both branches of its If: the Concat with a past, the present itself without one', async () => {
    const merged = await mergedDecoder(dirname(decoder), join(root, 'merged'));
    const pieces = withNewKvOutputs(await readFile(join(merged, MODEL_FILE)));
    expect(pieces).toBeDefined();
    const ort = await loadOrt();
    const session = await ort.InferenceSession.create(Buffer.concat(pieces!), {
      intraOpNumThreads: 1,
    });
    try {
      for (const [past, branch] of [
        [5, true],
        [0, false],
      ] as const) {
        const useCacheBranch = new ort.Tensor('bool', Uint8Array.of(branch ? 1 : 0), [1]);
        expectNewPositionsOfPresents(
          await runAfter(session, past, { use_cache_branch: useCacheBranch }),
          past,
        );
      }
    } finally {
      await session.release();
    }
  });

  it('decodes a mixed batch as the plain decoder does, on its new positions', async () => {
    const merged = await mergedDecoder(dirname(decoder), join(root, 'merged-decode'));
    const session = { session: { intraOpNumThreads: 1 } };
    const [plain, tapped] = await Promise.all([
      loadOrtStepDecoder(dirname(decoder), session),
      loadOrtStepDecoder(merged, session),
    ]);
    try {
      expect(tapped.signature).toMatchObject({ useCacheBranch: true, newKvOutputs: true });
      const run = async (d: typeof plain) => {
        const [a, b] = [d.open(), d.open()];
        const rows = [
          await d.step([
            { state: a, tokens: [1, 2, 3, 4, 5] },
            { state: b, tokens: [6, 7] },
          ]),
        ];
        for (let i = 0; i < 3; i++)
          rows.push(
            await d.step([
              { state: a, tokens: [8] },
              { state: b, tokens: [9] },
            ]),
          );
        return rows.flat();
      };
      const [expected, got] = [await run(plain), await run(tapped)];
      got.forEach((row, i) =>
        expect(
          row.reduce((m, v, j) => Math.max(m, Math.abs(v - expected[i]![j]!)), 0),
        ).toBeLessThan(1e-4),
      );
    } finally {
      await Promise.all([plain.close(), tapped.close()]);
    }
  });
});

describe('servedModelFile', () => {
  it('serves a decoder as a copy with the new positions, and any other model as it is', async () => {
    const served = await servedModelFile(decoder);
    expect(served.newKvOutputs).toBe(true);
    expect(served.path).not.toBe(decoder);
    expect(existsSync(served.path)).toBe(true);
    await served.release();
    expect(existsSync(dirname(served.path))).toBe(false);
    const tiny = join(root, 'tiny', MODEL_FILE);
    expect(await servedModelFile(tiny)).toMatchObject({ path: tiny, newKvOutputs: false });
  });

  it('keeps the copy in a cache folder for the next load, replacing it when the model changes', async () => {
    const cache = join(root, 'cache');
    const first = await servedModelFile(decoder, cache);
    expect(first.newKvOutputs).toBe(true);
    expect(first.path.startsWith(join(cache, 'decoders'))).toBe(true);
    await first.release();
    const written = (await stat(first.path)).mtimeMs;
    const again = await servedModelFile(decoder, cache);
    expect(again.path).toBe(first.path);
    expect((await stat(again.path)).mtimeMs).toBe(written);
    // An entry that lost its copy is made again.
    await rm(again.path);
    const remade = await servedModelFile(decoder, cache);
    expect(remade.path).toBe(first.path);
    expect(existsSync(remade.path)).toBe(true);
    // A new version of the model file: a new copy, and the old one is gone.
    await utimes(decoder, new Date(), new Date(Date.now() + 5_000));
    const changed = await servedModelFile(decoder, cache);
    expect(changed.path).not.toBe(first.path);
    expect(existsSync(dirname(first.path))).toBe(false);
    expect(await readdir(join(cache, 'decoders'))).toHaveLength(1);
  });

  it.skipIf(!run)('keeps the added outputs out of the model’s description', async () => {
    const model = await loadOrtModel(dirname(decoder));
    try {
      const outputs = model.outputs.map((o) => o.name);
      expect(outputs).toContain('present.0.key');
      expect(outputs.some((name) => name.startsWith('kiln_new_kv.'))).toBe(false);
    } finally {
      await model.dispose();
    }
  });
});
