import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeNpy } from '@kiln/core';
import { type TestServer, startTestServer, tempDir } from '../support/server-harness.js';

// The real pretrained SqueezeNet 1.1 beside the repository (never copied into it), served over
// HTTP by every engine that has a copy of it: ONNX (model.onnx), TorchScript (model.pt, which
// declares neither dtypes nor shapes) and TF.js layers (tfjs_layers/, NHWC).
const SHARED = path.resolve(
  fileURLToPath(new URL('../../../shared/models/squeezenet1_1', import.meta.url)),
);
const present = fs.existsSync(path.join(SHARED, 'model.onnx'));
if (!present) console.warn(`[kiln] skipping SqueezeNet over HTTP: ${SHARED} is absent`);

const PYTHON = '/usr/bin/python3';
const numpy = present
  ? spawnSync(PYTHON, ['-c', 'import numpy, PIL'], { encoding: 'utf8' })
  : undefined;
const numpyMissing = !numpy || numpy.status !== 0;
if (present && numpyMissing)
  console.warn(
    `[kiln] skipping the numpy client bodies: numpy and PIL do not import under ${PYTHON}`,
  );

const ENGINES = [
  { engine: 'OnnxRuntime', files: ['model.onnx'], layout: 'NCHW' },
  { engine: 'PyTorch', files: ['model.pt'], layout: 'NCHW' },
  {
    engine: 'TensorFlow',
    files: ['tfjs_layers/model.json', 'tfjs_layers/group1-shard1of1.bin'],
    layout: 'NHWC',
  },
] as const;

// The model's conventions (shared/models/README.md): BGR, 0..255, no mean/std.
const IMAGE_PROPERTIES = [
  'translatorFactory=image-classification',
  'channels=BGR',
  'range=0-255',
  'normalize=false',
  'topK=3',
];
const IMAGES = [
  // Already 224×224: no resize or crop.
  { image: 'kitten_224.png', config: 'exact', label: 'tabby, tabby cat', p: 0.931 },
  { image: 'cat.jpg', config: 'crop', label: 'Egyptian cat', p: 0.911 },
  { image: 'dog.jpg', config: 'crop', label: 'golden retriever', p: 0.991 },
];

/**
 * A model folder in a temporary store: the shared files, flat, plus this test's
 * serving.properties. A TF.js model.json is stored under the folder's own name, as npm
 * packages of TF.js models ship them (emotion/emotion.json).
 */
function modelFolder(root: string, name: string, files: readonly string[], properties: string[]) {
  const dir = path.join(root, name);
  fs.mkdirSync(dir, { recursive: true });
  for (const file of files) {
    const base = path.basename(file) === 'model.json' ? `${name}.json` : path.basename(file);
    fs.copyFileSync(path.join(SHARED, file), path.join(dir, base));
  }
  fs.copyFileSync(path.join(SHARED, 'synset.txt'), path.join(dir, 'synset.txt'));
  fs.writeFileSync(path.join(dir, 'serving.properties'), `${properties.join('\n')}\n`);
  return dir;
}

/** The kitten as a numpy client sends it: BGR 0..255 float32, saved with np.save / np.savez. */
function numpyBodies(dir: string): void {
  const script = String.raw`
import sys, numpy as np
from PIL import Image
image = np.asarray(Image.open(sys.argv[1]).convert('RGB'), dtype=np.float32)[:, :, ::-1]
nchw = np.ascontiguousarray(image.transpose(2, 0, 1)[None])
nhwc = np.ascontiguousarray(image[None])
np.save(sys.argv[2] + '/nchw.npy', nchw)
np.savez(sys.argv[2] + '/nchw.npz', nchw)
np.save(sys.argv[2] + '/nhwc.npy', nhwc)
np.savez(sys.argv[2] + '/nhwc.npz', nhwc)
`;
  const run = spawnSync(
    PYTHON,
    ['-c', script, path.join(SHARED, 'images', 'kitten_224.png'), dir],
    { encoding: 'utf8' },
  );
  if (run.status !== 0) throw new Error(`numpy client failed: ${run.stderr}`);
}

describe.skipIf(!present)('pretrained SqueezeNet 1.1 over HTTP, on every engine', () => {
  let root: string;
  let server: TestServer;
  const labels = present
    ? fs.readFileSync(path.join(SHARED, 'synset.txt'), 'utf8').trim().split('\n')
    : [];
  const tabby = labels.findIndex((l) => l.endsWith(' tabby, tabby cat'));

  beforeAll(async () => {
    root = tempDir('squeezenet-http');
    const models: string[] = [];
    for (const { engine, files } of ENGINES) {
      const engineLine = `engine=${engine}`;
      models.push(
        modelFolder(root, `${engine}-exact`, files, [
          engineLine,
          ...IMAGE_PROPERTIES,
          'resize=false',
          'centerCrop=false',
        ]),
        modelFolder(root, `${engine}-crop`, files, [engineLine, ...IMAGE_PROPERTIES]),
        modelFolder(root, `${engine}-raw`, files, [engineLine]),
      );
    }
    if (!numpyMissing) numpyBodies(root);
    server = await startTestServer({ models });
    await server.settled();
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(root, { recursive: true, force: true });
  });

  for (const { engine } of ENGINES) {
    for (const expected of IMAGES) {
      it(`${engine} labels ${expected.image} as ${expected.label} through the image translator`, async () => {
        const response = await fetch(
          `${server.inference}/predictions/${engine}-${expected.config}`,
          {
            method: 'POST',
            body: fs.readFileSync(path.join(SHARED, 'images', expected.image)),
            headers: {
              'content-type': expected.image.endsWith('.png') ? 'image/png' : 'image/jpeg',
            },
          },
        );
        const body = (await response.json()) as { className: string; probability: number }[];
        expect(response.status, JSON.stringify(body)).toBe(200);
        expect(body[0]!.className).toBe(expected.label);
        expect(body[0]!.probability).toBeCloseTo(expected.p, 2);
      });
    }

    for (const format of ['npy', 'npz'] as const) {
      it.skipIf(numpyMissing)(
        `${engine} answers tabby to the kitten as ${format === 'npz' ? 'a positional np.savez' : 'an np.save'} body`,
        async () => {
          const layout = ENGINES.find((e) => e.engine === engine)!.layout.toLowerCase();
          const response = await fetch(`${server.inference}/predictions/${engine}-raw`, {
            method: 'POST',
            body: fs.readFileSync(path.join(root, `${layout}.${format}`)),
            headers: { 'content-type': `tensor/${format}`, accept: 'tensor/npy' },
          });
          const bytes = new Uint8Array(await response.arrayBuffer());
          expect(response.status, new TextDecoder().decode(bytes)).toBe(200);
          const scores = decodeNpy(bytes);
          expect([...scores.shape]).toEqual([1, 1000]);
          const data = scores.data as Float32Array;
          const top = data.indexOf(Math.max(...data));
          expect(labels[top]).toMatch(/tabby, tabby cat$/);
          expect(top).toBe(tabby);
          expect(data[top]).toBeCloseTo(0.931, 2);
        },
      );
    }
  }
});
