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
