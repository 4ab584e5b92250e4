import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestModels, makeTestModels, ortAvailable } from '../test-support/models.js';
import { STACK_TRACE, kiln } from '../test-support/run-binary.js';

const run = await ortAvailable();

describe.skipIf(!run).concurrent('kiln inspect', () => {
  let models: TestModels;

  beforeAll(async () => {
    models = await makeTestModels('kiln-cli-inspect-');
  });
  afterAll(async () => {
    await models?.remove();
  });

  it('reports engine, signature, files, serving.properties and what the engine says', async () => {
    const { code, stdout, stderr } = await kiln(['inspect', models.iris]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toMatch(/^model\s+iris$/m);
    expect(stdout).toMatch(/^engine\s+OnnxRuntime 1\.\d+\.\d+ \(named in serving.properties/m);
    expect(stdout).toMatch(/^translator\s+translator\.mjs \(plugin in the model folder\)$/m);
    expect(stdout).toMatch(/^\s+features\s+float32\s+\[-1,4\]$/m);
    expect(stdout).toMatch(/^\s+probabilities\s+float32\s+\[-1,3\]$/m);
    expect(stdout).toMatch(/^\s+model\.onnx\s+[\d.]+ (B|KiB)$/m);
    expect(stdout).toMatch(/^\s+batch_size=8$/m);
    expect(stdout).toMatch(/^\s+job_queue_size=1000\s+# Kiln's default$/m);
    expect(stdout).toMatch(/engine reports\n\s+runtime: onnxruntime-node/);
    expect(stdout).toMatch(/model reports\n[\s\S]*optLevel: all/);
  });

  it('prints JSON with --json, overrides applied', async () => {
    const { code, stdout } = await kiln([
      '--json',
      'inspect',
      models.mlp,
      '--option',
      'batch_size=4',
    ]);
    expect(code).toBe(0);
    const report = JSON.parse(stdout);
    expect(report).toMatchObject({
      name: 'mlp',
      engine: 'OnnxRuntime',
      servingProperties: { set: { batch_size: '4', engine: 'OnnxRuntime' } },
      loaded: {
        device: 'cpu',
        inputs: [{ name: 'x', dtype: 'float32', shape: [-1, 16] }],
        outputs: [{ name: 'logits', dtype: 'float32', shape: [-1, 3] }],
        engineReport: { runtime: 'onnxruntime-node' },
      },
    });
    expect(report.files.map((f: { path: string }) => f.path)).toEqual([
      'model.onnx',
      'serving.properties',
    ]);
  });

  it('reads files and settings only with --no-load', async () => {
    const { code, stdout } = await kiln(['inspect', models.tiny, '--no-load']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/not loaded \(--no-load\)/);
    expect(stdout).not.toMatch(/^inputs$/m);
  });

  it('fails with one line and a hint for a missing model and a remote URL', async () => {
    const missing = await kiln(['inspect', `${models.root}/nope`]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^error: no model at .*\/nope/);
    expect(missing.stderr).toMatch(/^hint: check the path or URL/m);
    const remote = await kiln(['inspect', 'resnet::OnnxRuntime=https://example.com/resnet.zip']);
    expect(remote.code).toBe(1);
    expect(remote.stderr).toMatch(
      /^error: model URL https:\/\/example\.com\/resnet\.zip is remote/,
    );
    expect(remote.stderr).toMatch(/^hint: download the model first/m);
    expect(missing.stderr + remote.stderr).not.toMatch(STACK_TRACE);
  });
});

const hasPython = await import('node:child_process').then(({ execFileSync }) => {
  try {
    execFileSync('/usr/bin/python3', ['-c', 'import numpy'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
});

describe.skipIf(!hasPython)('kiln inspect of a Python model', () => {
  it('reports the entry point, handler, Python version, venv and requirements', async () => {
    const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = await mkdtemp(join(tmpdir(), 'kiln-cli-inspect-python-'));
    try {
      await writeFile(join(dir, 'model.py'), 'def handle(inputs):\n    return None\n');
      await writeFile(join(dir, 'requirements.txt'), 'numpy\n');
      await writeFile(
        join(dir, 'serving.properties'),
        'option.pythonExecutable=/usr/bin/python3\n',
      );
      const { code, stdout } = await kiln(['--json', 'inspect', dir]);
      expect(code).toBe(0);
      const report = JSON.parse(stdout);
      expect(report.engine).toBe('Python');
      expect(report.translator).toMatch(/^python \(the request body reaches handle\(inputs\)/);
      expect(report.loaded.modelReport).toMatchObject({
        entryPoint: 'model.py',
        handler: 'handle',
        pythonExecutable: '/usr/bin/python3',
        pythonVersion: expect.stringMatching(/^3\.\d+\.\d+$/),
        venv: null,
        requirements: ['numpy'],
        unsatisfiedRequirements: [],
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/**
 * A tiny image classifier: `data` float32 [batch,3,8,8] → each channel's mean as one of 3
 * classes, named in synset.txt.
 */
async function imageClassifierFolder(dir: string, properties: Record<string, string>) {
  const { mkdir, writeFile } = await import('node:fs/promises');
  const { join } = await import('node:path');
  const { GraphBuilder, attr, writeModelFolder } = await import('@kiln/model-tools');
  const g = new GraphBuilder('channel-means');
  g.input('data', 'float32', ['batch', 3, 8, 8]);
  const pooled = g.op('GlobalAveragePool', ['data']);
  g.op('Flatten', [pooled], { axis: attr.int(1) }, { output: 'scores' });
  g.output('scores', 'float32', ['batch', 3]);
  await mkdir(dir, { recursive: true });
  await writeModelFolder(dir, g.toModel(), properties);
  await writeFile(join(dir, 'synset.txt'), 'n01 blue\nn02 green\nn03 red\n');
  return dir;
}

describe.skipIf(!run)('kiln inspect of an image classifier', () => {
  let root: string;
  beforeAll(async () => {
    const { mkdtemp } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    root = await mkdtemp(`${tmpdir()}/kiln-cli-inspect-image-`);
  });
  afterAll(async () => {
    const { rm } = await import('node:fs/promises');
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("shows the channel order and range it is fed, and warns when Caffe's mean meets RGB", async () => {
    const dir = await imageClassifierFolder(`${root}/caffe`, {
      translatorFactory: 'image-classification',
      range: '0-255',
      normalize: '123.68,116.779,103.939,1,1,1',
    });
    const { code, stdout, stderr } = await kiln(['inspect', dir]);
    expect(stderr).toBe('');
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /^image input RGB order, values 0\.\.255, Caffe's ImageNet mean 123\.68,116\.779,103\.939 std 1,1,1 \(R,G,B\), NCHW 8×8$/m,
    );
    expect(stdout).toMatch(/^\s+warning: .*Caffe-trained models take BGR.*set channels=BGR/m);

    const json = await kiln(['--json', 'inspect', dir, '--option', 'channels=BGR']);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout).imageInput).toEqual({
      stated: true,
      channels: 'BGR',
      range: '0-255',
      normalize: { mean: [123.68, 116.779, 103.939], std: [1, 1, 1] },
      statistics: 'imagenet-caffe',
      layout: 'NCHW',
      width: 8,
      height: 8,
      warnings: [],
    });
  });

  it('says nothing states them when an image classifier is served as raw tensors', async () => {
    const dir = await imageClassifierFolder(`${root}/raw`, {});
    const { code, stdout } = await kiln(['inspect', dir]);
    expect(code).toBe(0);
    expect(stdout).toMatch(
      /^image input not stated: the model looks like an image classifier \(synset\.txt, input \[-1,3,8,8\]\).*channel order \(RGB or BGR\) and value range \(0\.\.1 or 0\.\.255\)/m,
    );
  });

  it('reports nothing of images for a model that takes none', async () => {
    const dir = await imageClassifierFolder(`${root}/plain`, {});
    const { writeFile } = await import('node:fs/promises');
    const { tinyModel } = await import('@kiln/model-tools');
    await tinyModel(dir);
    await writeFile(`${dir}/synset.txt`, 'a\nb\n');
    const { stdout } = await kiln(['--json', 'inspect', dir]);
    expect(JSON.parse(stdout).imageInput).toBeUndefined();
  });
});

// The real pretrained SqueezeNet 1.1 beside the repository (never copied into it): BGR, 0..255.
const SQUEEZENET = fileURLToPath(
  new URL('../../../../../shared/models/squeezenet1_1', import.meta.url),
);
const squeezenetPresent = existsSync(`${SQUEEZENET}/model.onnx`);
if (!squeezenetPresent)
  console.warn(`[kiln] skipping the SqueezeNet inspect: ${SQUEEZENET} is absent`);

describe.skipIf(!run || !squeezenetPresent)('kiln inspect of the real SqueezeNet 1.1', () => {
  it('shows BGR, 0..255 once its serving.properties say so, and asks for them until then', async () => {
    const { copyFile, mkdtemp, rm, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const dir = await mkdtemp(`${tmpdir()}/kiln-cli-inspect-squeezenet-`);
    try {
      await copyFile(`${SQUEEZENET}/model.onnx`, `${dir}/model.onnx`);
      await copyFile(`${SQUEEZENET}/synset.txt`, `${dir}/synset.txt`);
      const raw = await kiln(['inspect', dir]);
      expect(raw.code).toBe(0);
      expect(raw.stdout).toMatch(
        /^image input not stated: .*\(synset\.txt, input \[-1,3,224,224\]\)/m,
      );
      await writeFile(
        `${dir}/serving.properties`,
        'translatorFactory=image-classification\nchannels=BGR\nrange=0-255\n',
      );
      const stated = await kiln(['inspect', dir]);
      expect(stated.code).toBe(0);
      expect(stated.stdout).toMatch(
        /^image input BGR order, values 0\.\.255, no mean\/std, NCHW 224×224$/m,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
