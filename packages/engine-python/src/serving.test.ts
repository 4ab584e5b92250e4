import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CPU,
  KilnErrorCode,
  decodeNpy,
  parseServingProperties,
  type ServingInput,
  type ServingOutput,
} from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { createPythonEngine } from './provider.js';
import type { PythonModel } from './python-model.js';
import { probePython } from './probe.js';

const PYTHON = '/usr/bin/python3';
const { run } = await checkEngine('Python', () => probePython(PYTHON));

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function modelDir(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'kiln-python-serving-'));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

async function load(dir: string, options: Record<string, string> = {}): Promise<PythonModel> {
  const engine = await createPythonEngine({ pythonExecutable: PYTHON }).load();
  return (await engine.loadModel({
    name: 'm',
    modelDir: dir,
    device: CPU,
    options: { pythonExecutable: PYTHON, ...options },
    properties: parseServingProperties(''),
  })) as PythonModel;
}

/** A serve worker's view of the model: requests in, a result per request out. */
async function predictor(model: PythonModel) {
  const context = await model.newServingContext();
  const batchPredictSettled = (inputs: ServingInput[]) => context.serve(inputs);
  const batchPredict = async (inputs: ServingInput[]): Promise<ServingOutput[]> =>
    (await context.serve(inputs)).map((result) => {
      if (!result.ok) throw result.error;
      return result.value;
    });
  return {
    batchPredictSettled,
    batchPredict,
    predict: async (input: ServingInput) => (await batchPredict([input]))[0]!,
    close: () => context.close(),
  };
}

/** A text answer: the handler's bytes as they are, unlabelled as DJL sends them. */
function textOf(output: ServingOutput): string {
  if (output.type !== 'bytes') throw new Error(`not bytes: ${output.type}`);
  expect(output.contentType).toBeUndefined();
  return new TextDecoder().decode(output.body);
}

/** The first tensor of a tensors answer, as numbers; fails on any other answer. */
function firstTensor(output: ServingOutput): number[] {
  if (output.type !== 'tensors') throw new Error(`expected tensors, got ${output.type}`);
  return Array.from(output.tensors.tensors[0]!.data as ArrayLike<number>);
}

const json = (value: unknown): ServingInput => ({
  body: new TextEncoder().encode(JSON.stringify(value)),
  contentType: 'application/json',
  headers: { 'x-trace': 'abc' },
});

const ECHO = `
import os
from djl_python import Input, Output
def handle(inputs: Input):
    if inputs.is_empty():
        return None
    if inputs.is_batch():
        out = Output()
        for i, item in enumerate(inputs.get_batches()):
            body = item.get_as_json()
            if body.get("fail"):
                out.add_property("code", 400, batch_index=i)
                out.add_property("message", "request %d refused" % i, batch_index=i)
                continue
            out.add_as_json({"x": body["x"], "batch": inputs.get_batch_size(), "i": i}, batch_index=i)
        return out
    body = inputs.get_as_json()
    if body.get("fail"):
        return Output().set_code(422).set_message("x is missing")
    return Output().add_as_json({
        "x": body["x"],
        "batch": 1,
        "type": inputs.get_property("Content-Type"),
        "trace": inputs.get_property("x-trace"),
    })
`;

describe.skipIf(!run)('Python mode serving', () => {
  it('hands the handler the raw body and headers, and answers its JSON', async () => {
    const model = await load(modelDir({ 'model.py': ECHO }));
    const p = await predictor(model);
    try {
      expect(await p.predict(json({ x: 7 }))).toEqual({
        type: 'json',
        value: { x: 7, batch: 1, type: 'application/json', trace: 'abc' },
      });
      // A client's header cannot make its request look like a batch to the handler.
      const spoofed = { ...json({ x: 8 }), headers: { batch_size: '3' } };
      expect(await p.predict(spoofed)).toEqual({
        type: 'json',
        value: { x: 8, batch: 1, type: 'application/json', trace: null },
      });
      // A header without a value (a JavaScript caller's undefined) is left out, not sent broken.
      const unset = { ...json({ x: 9 }), headers: { 'x-trace': undefined as unknown as string } };
      expect(await p.predict(unset)).toEqual({
        type: 'json',
        value: { x: 9, batch: 1, type: 'application/json', trace: null },
      });
      const refused = await p.batchPredictSettled([json({ fail: true })]);
      expect(refused[0]).toMatchObject({
        ok: false,
        error: { code: KilnErrorCode.InvalidInput, message: 'x is missing' },
      });
    } finally {
      await p.close();
      await model.dispose();
    }
  });

  it('gives each multipart part to the handler as a content named by its field', async () => {
    const source = `
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    return Output().add_as_json({name: len(inputs.get_as_bytes(name)) for name, _ in inputs.content})
`;
    const model = await load(modelDir({ 'model.py': source }));
    const p = await predictor(model);
    try {
      const parts = [
        { name: 'image', data: new Uint8Array(5), contentType: 'image/png' },
        { name: 'meta', data: new TextEncoder().encode('{"a":1}'), contentType: undefined },
      ];
      expect(await p.predict({ parts } as ServingInput)).toEqual({
        type: 'json',
        value: { image: 5, meta: 7 },
      });
    } finally {
      await p.close();
      await model.dispose();
    }
  });

  it("adds each query parameter as a content named by its key, as DJL's RequestParser does; a single form field keeps its name", async () => {
    const source = `
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    return Output().add_as_json([[name, inputs.get_as_string(name)] for name, _ in inputs.content])
`;
    const model = await load(modelDir({ 'model.py': source }));
    const p = await predictor(model);
    try {
      const query: [string, string][] = [
        ['exception', 'boom'],
        ['stream', 'true'],
      ];
      const body = new TextEncoder().encode('hi');
      expect(await p.predict({ body, query })).toEqual({
        type: 'json',
        value: [...query, ['data', 'hi']],
      });
      expect(await p.predict({ body, field: 'exception' })).toEqual({
        type: 'json',
        value: [['exception', 'hi']],
      });
    } finally {
      await p.close();
      await model.dispose();
    }
  });

  it('batches requests into one call whose get_batches() yields them, each answered alone', async () => {
    const model = await load(modelDir({ 'model.py': ECHO }));
    const p = await predictor(model);
    try {
      const results = await p.batchPredictSettled([
        json({ x: 1 }),
        json({ fail: true }),
        json({ x: 3 }),
      ]);
      expect(results[0]).toEqual({
        ok: true,
        value: { type: 'json', value: { x: 1, batch: 3, i: 0 } },
      });
      expect(results[1]).toMatchObject({ ok: false, error: { message: 'request 1 refused' } });
      expect(results[2]).toEqual({
        ok: true,
        value: { type: 'json', value: { x: 3, batch: 3, i: 2 } },
      });
    } finally {
      await p.close();
      await model.dispose();
    }
  });

  it('takes one Output per request as the answer to a batch, tensors included', async () => {
    const source = `
import numpy as np
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    return [Output().add_as_numpy([np.full(2, len(item.get_as_bytes()), dtype=np.int32)])
            for item in inputs.get_batches()]
`;
    const model = await load(modelDir({ 'model.py': source }));
    const p = await predictor(model);
    try {
      const bodies = ['a', 'bbb'].map((text) => ({
        body: new TextEncoder().encode(text),
        contentType: 'text/plain',
      }));
      const [a, b] = await p.batchPredict(bodies);
      expect(firstTensor(a!)).toEqual([1, 1]);
      expect(firstTensor(b!)).toEqual([3, 3]);
    } finally {
      await p.close();
      await model.dispose();
    }
  });

  it('answers npz bytes from add_as_npz as tensors', async () => {
    const source = `
import numpy as np
from djl_python import Output
def handle(inputs):
    if inputs.is_empty():
        return None
    x = inputs.get_as_numpy()[0]
    return Output().add_as_npz([x * 3])
`;
    const model = await load(modelDir({ 'model.py': source }));
    const p = await predictor(model);
    try {
      const npy = execFileSync(PYTHON, [
        '-c',
        'import io,sys,numpy as np; b=io.BytesIO(); np.save(b, np.array([1,2],dtype=np.float32)); sys.stdout.buffer.write(b.getvalue())',
      ]);
      const out = await p.predict({ body: new Uint8Array(npy), contentType: 'tensor/npy' });
      expect(firstTensor(out)).toEqual([3, 6]);
      expect(decodeNpy(new Uint8Array(npy)).shape).toEqual([2]);
    } finally {
      await p.close();
      await model.dispose();
    }
  });
});

/** A wheel written by hand: a zip with the package and its dist-info (no build tools needed). */
function writeWheel(dir: string, name: string, version: string): void {
  execFileSync(PYTHON, [
    '-c',
    `
import base64, hashlib, sys, zipfile
name, version, out = sys.argv[1:4]
files = {
    name + "/__init__.py": "VALUE = %r\\n" % (name + "-" + version),
    "%s-%s.dist-info/METADATA" % (name, version): "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n" % (name, version),
    "%s-%s.dist-info/WHEEL" % (name, version): "Wheel-Version: 1.0\\nGenerator: kiln-test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = "%s-%s.dist-info/RECORD" % (name, version)
lines = []
with zipfile.ZipFile("%s/%s-%s-py3-none-any.whl" % (out, name, version), "w") as whl:
    for path, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append("%s,sha256=%s,%d" % (path, digest, len(data)))
        whl.writestr(path, data)
    lines.append(record + ",,")
    whl.writestr(record, "\\n".join(lines) + "\\n")
`,
    name,
    version,
    dir,
  ]);
}

const USES_WHEEL = `
from djl_python import Output
def handle(inputs):
    import kilnwheeltest
    if inputs.is_empty():
        return None
    return Output().add(kilnwheeltest.VALUE)
`;

describe.skipIf(!run)('Python mode requirements.txt', () => {
  it('installs local wheels into a per-model venv with option.enable_venv=true', async () => {
    const dir = modelDir({
      'model.py': USES_WHEEL,
      'requirements.txt': 'kilnwheeltest==1.2\nnumpy\n',
    });
    mkdirSync(join(dir, 'local_wheels'));
    writeWheel(join(dir, 'local_wheels'), 'kilnwheeltest', '1.2');
    const venvRoot = join(dir, '..', `${dir.split('/').pop()}-venvs`);
    dirs.push(venvRoot);
    const model = await load(dir, { enable_venv: 'true', venv_dir: venvRoot });
    const p = await predictor(model);
    try {
      expect(textOf(await p.predict({ body: new Uint8Array([1]) }))).toBe('kilnwheeltest-1.2');
      const described = model.describe();
      expect(described.venv).toMatch(new RegExp(`^${venvRoot}/m-[0-9a-f]{16}$`));
      expect(described.requirements).toEqual(['kilnwheeltest==1.2', 'numpy']);
      // The system interpreter itself did not get the package.
      expect(() =>
        execFileSync(PYTHON, ['-c', 'import kilnwheeltest'], { stdio: 'ignore' }),
      ).toThrow();
    } finally {
      await p.close();
      await model.dispose();
    }
  });

  it('loads without enable_venv when the system satisfies requirements.txt', async () => {
    const source = `
import numpy
from djl_python import Output
def handle(inputs):
    return None if inputs.is_empty() else Output().add(numpy.__name__)
`;
    const model = await load(
      modelDir({ 'model.py': source, 'requirements.txt': '# the system has it\nnumpy>=1.0\n' }),
    );
    try {
      expect(model.describe()).toMatchObject({
        venv: null,
        requirements: ['numpy>=1.0'],
        unsatisfiedRequirements: [],
      });
      const p = await predictor(model);
      expect(textOf(await p.predict({ body: new Uint8Array([1]) }))).toBe('numpy');
      await p.close();
    } finally {
      await model.dispose();
    }
  });

  it('fails loading with pip’s reason when a requirement cannot be installed', async () => {
    const dir = modelDir({
      'model.py': USES_WHEEL,
      'requirements.txt': 'kiln-no-such-package==9.9\n',
    });
    mkdirSync(join(dir, 'local_wheels'));
    const venvRoot = join(dir, '..', `${dir.split('/').pop()}-venvs`);
    dirs.push(venvRoot);
    const failure = await load(dir, { enable_venv: 'true', venv_dir: venvRoot }).then(
      () => undefined,
      (error: Error) => error,
    );
    expect(failure?.message).toMatch(
      /requirements\.txt of m could not be installed \(pip install\): .*kiln-no-such-package==9\.9/,
    );
  });

  it('refuses an option.enable_venv that is neither true nor false', async () => {
    await expect(
      load(modelDir({ 'model.py': USES_WHEEL }), { enable_venv: 'sometimes' }),
    ).rejects.toThrow(/option.enable_venv=sometimes must be true or false/);
  });
});
