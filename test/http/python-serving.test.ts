import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, decodeNpy, encodeNDList, encodeNpy, encodeNpz } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

// Python mode with request bodies as they arrived: DJL handlers reading images, JSON and numpy
// bodies, dynamic batching through get_batches(), and requirements.txt.
const PYTHON = '/usr/bin/python3';
const { run } = await checkEngine('Python', () => {
  try {
    execFileSync(PYTHON, ['-c', 'import numpy, PIL'], { stdio: 'ignore' });
    return Promise.resolve(null);
  } catch {
    return Promise.resolve(
      `${PYTHON} cannot import numpy and PIL (apt-get install python3-numpy python3-pil)`,
    );
  }
});

const SQUEEZENET = fileURLToPath(new URL('../../../shared/models/squeezenet1_1', import.meta.url));
const hasSqueezenet =
  fs.existsSync(path.join(SQUEEZENET, 'model.pt')) &&
  (() => {
    try {
      execFileSync(PYTHON, ['-c', 'import torch'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
if (!hasSqueezenet) {
  console.warn(`skipping the SqueezeNet handler: ${SQUEEZENET}/model.pt or Python torch is absent`);
}

/** A DJL Serving handler that uses every Input and Output method. */
const ALL_METHODS = `
import io, json
import numpy as np
from djl_python import Input, Output

def handle(inputs: Input):
    if inputs.is_empty():
        return None
    assert not inputs.is_batch() and inputs.get_batches() == [inputs]
    kind = inputs.get_property("X-Kind")
    props = inputs.get_properties()
    out = Output().add_property("x-handled-by", "djl").set_code(200).set_message("OK")
    # Headers the server must not send: its own framing, and a value with a line break.
    out.add_property("Transfer-Encoding", "chunked").add_property("x-split", "a\\r\\nx-evil: 1")
    if kind == "image":
        image = inputs.get_as_image()
        return out.add_as_json({"size": list(image.size), "mode": image.mode})
    if kind == "json":
        body = inputs.get_as_json()
        text = inputs.get_as_string()
        return out.add_as_json({"sum": sum(body["values"]), "chars": len(text),
                                "bytes": len(inputs.get_as_bytes()), "type": props["content-type"],
                                "keys": [name for name, _ in inputs.content]})
    if kind == "npz":
        arrays = inputs.get_as_npz()
        return out.add_as_npz([a * 2 for a in arrays])
    if kind == "numpy":
        arrays = inputs.get_as_numpy()
        return out.add_as_numpy([a + 1 for a in arrays], key="y")
    if kind == "refuse":
        return Output().set_code(400).set_message("this kind is refused")
    if kind == "busy":
        return Output().set_code(429).set_message("come back later")
    if kind == "unavailable":
        return Output().set_code(503).set_message("warming up")
    if kind == "nothing":
        return None
    if kind == "oom":
        raise MemoryError("CUDA error: out of memory")
    if kind == "text":
        return out.add("hello " + inputs.get_as_string())
    if kind == "png":
        return out.add_property("content-type", "image/png").add(b"\\x89PNG\\r\\n\\x1a\\n\\xff\\x00")
    raise ValueError("unknown kind %r" % kind)
`;

const CLASSIFY = `
import numpy as np
import torch
from djl_python import Input, Output

model = None
labels = None

def handle(inputs: Input):
    global model, labels
    if model is None:
        model = torch.jit.load(${JSON.stringify(path.join(SQUEEZENET, 'model.pt'))})
        model.eval()
        with open(${JSON.stringify(path.join(SQUEEZENET, 'synset.txt'))}) as f:
            labels = [line.strip().split(" ", 1)[1] for line in f]
    if inputs.is_empty():
        return None
    image = inputs.get_as_image().convert("RGB").resize((224, 224))
    # The model takes BGR, 0..255, NCHW, no normalisation.
    x = np.asarray(image, dtype=np.float32)[:, :, ::-1].transpose(2, 0, 1)[None].copy()
    with torch.no_grad():
        probabilities = model(torch.from_numpy(x))[0]
    top = torch.topk(probabilities, 3)
    return Output().add_as_json([
        {"className": labels[i], "probability": float(p)} for p, i in zip(top.values, top.indices)
    ])
`;

const BATCHING = `
import numpy as np
from djl_python import Input, Output

def handle(inputs: Input):
    if inputs.is_empty():
        return None
    out = Output()
    for i, item in enumerate(inputs.get_batches()):
        x = item.get_as_json()["x"]
        out.add_as_json({"x": x, "batch": inputs.get_batch_size() if inputs.is_batch() else 1},
                        batch_index=i)
    if not inputs.is_batch():
        # A single request: DJL handlers answer it unprefixed.
        return Output().add_as_json({"x": inputs.get_as_json()["x"], "batch": 1})
    return out
`;

const NEEDS_PACKAGE = `
import kiln_never_published
def handle(inputs):
    return None
`;

let t: TestServer;

beforeAll(async () => {
  if (!run) return;
  const root = tempDir('python-serving');
  const models: Record<string, { files: Record<string, string>; properties?: string }> = {
    djl: { files: { 'model.py': ALL_METHODS } },
    batching: {
      files: { 'model.py': BATCHING },
      properties: 'batch_size=8\nmax_batch_delay=3000\n',
    },
    broken: {
      files: { 'model.py': NEEDS_PACKAGE, 'requirements.txt': 'kiln-never-published==1.0\n' },
      properties: `option.enable_venv=true\noption.venv_dir=${root}/venvs\n`,
    },
    ...(hasSqueezenet ? { squeezenet: { files: { 'model.py': CLASSIFY } } } : {}),
  };
  const urls = Object.entries(models).map(([name, { files, properties }]) => {
    const dir = path.join(root, name);
    fs.mkdirSync(path.join(dir, 'local_wheels'), { recursive: true });
    for (const [file, text] of Object.entries(files)) fs.writeFileSync(path.join(dir, file), text);
    fs.writeFileSync(
      path.join(dir, 'serving.properties'),
      `option.pythonExecutable=${PYTHON}\n${properties ?? ''}`,
    );
    return `${name}::Python=${dir}`;
  });
  t = await startTestServer({ models: urls });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
});

function predict(model: string, body: Uint8Array | string, headers: Record<string, string>) {
  return fetch(`${t.inference}/predictions/${model}`, { method: 'POST', headers, body });
}

function png(width: number, height: number): Uint8Array {
  const script = `
import io, sys
from PIL import Image
b = io.BytesIO()
Image.new("RGB", (${width}, ${height}), (10, 200, 30)).save(b, format="PNG")
sys.stdout.buffer.write(b.getvalue())`;
  return new Uint8Array(execFileSync(PYTHON, ['-c', script]));
}

describe.skipIf(!run)('Python mode over HTTP with request bodies', () => {
  it('gives the handler an image body through get_as_image()', async () => {
    const response = await predict('djl', png(5, 3), {
      'content-type': 'image/png',
      'x-kind': 'image',
    });
    const { status, body, headers } = await jsonOf(response);
    expect(status).toBe(200);
    expect(headers.get('content-type')).toMatch(/application\/json/);
    // Output.add_property becomes a response header, as DJL Serving sends it.
    expect(headers.get('x-handled-by')).toBe('djl');
    expect(headers.get('transfer-encoding')).toBeNull();
    expect(headers.get('x-split')).toBeNull();
    expect(headers.get('x-evil')).toBeNull();
    expect(body).toEqual({ size: [5, 3], mode: 'RGB' });
  });

  it('gives the handler a JSON body through get_as_json(), get_as_string() and get_as_bytes()', async () => {
    const text = JSON.stringify({ values: [1, 2, 3.5] });
    const { status, body } = await jsonOf(
      await predict('djl', text, { 'content-type': 'application/json', 'x-kind': 'json' }),
    );
    expect(status).toBe(200);
    expect(body).toEqual({
      sum: 6.5,
      chars: text.length,
      bytes: text.length,
      type: 'application/json',
      keys: ['data'],
    });
  });

  it('decodes npy, npz and DJL ndlist bodies in the handler and answers tensors', async () => {
    const x = new Tensor('float32', new Float32Array([1, 2, 3]), [3]);
    for (const [type, body] of [
      ['tensor/npy', encodeNpy(x)],
      ['tensor/ndlist', encodeNDList(NDList.of(x))],
    ] as const) {
      const response = await predict('djl', body, {
        'content-type': type,
        'x-kind': 'numpy',
        accept: 'tensor/npy',
      });
      const bytes = new Uint8Array(await response.arrayBuffer());
      expect(response.status, `${type}: ${Buffer.from(bytes).toString()}`).toBe(200);
      expect([...(decodeNpy(bytes).data as Float32Array)]).toEqual([2, 3, 4]);
    }
    const npz = encodeNpz(NDList.of(x));
    const response = await predict('djl', npz, {
      'content-type': 'tensor/npz',
      'x-kind': 'npz',
      accept: 'tensor/npy',
    });
    const bytes = new Uint8Array(await response.arrayBuffer());
    expect(response.status, Buffer.from(bytes).toString()).toBe(200);
    expect([...(decodeNpy(bytes).data as Float32Array)]).toEqual([2, 4, 6]);
  });

  it('answers text as the handler wrote it and a handler’s 400 as a clean 400', async () => {
    const text = await predict('djl', 'kiln', { 'content-type': 'text/plain', 'x-kind': 'text' });
    expect(text.status).toBe(200);
    // Bytes added without a content type go out unlabelled, as DJL sends them.
    expect(text.headers.get('content-type')).toBeNull();
    expect(await text.text()).toBe('hello kiln');
    const refused = await jsonOf(await predict('djl', 'x', { 'x-kind': 'refuse' }));
    expect(refused.status).toBe(400);
    expect(expectCleanError(refused.body)).toContain('this kind is refused');
    const raised = await jsonOf(await predict('djl', 'x', { 'x-kind': 'nothing-known' }));
    expect(raised.status).toBeGreaterThanOrEqual(500);
    expect(expectCleanError(raised.body)).toContain("unknown kind 'nothing-known'");
  });

  it('answers 204 without a body when the handler returns None, as DJL Serving does', async () => {
    const response = await predict('djl', 'x', { 'x-kind': 'nothing' });
    expect(response.status).toBe(204);
    expect(await response.text()).toBe('');
  });

  it('answers bytes the handler wrote under its content type, as they are', async () => {
    const response = await predict('djl', 'x', { 'x-kind': 'png' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('image/png');
    expect([...new Uint8Array(await response.arrayBuffer())]).toEqual([
      0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0xff, 0x00,
    ]);
  });

  it("answers with the handler's own error status, and 507 when it runs out of memory", async () => {
    for (const [kind, status, message] of [
      ['busy', 429, 'come back later'],
      ['unavailable', 503, 'warming up'],
      ['oom', 507, 'MemoryError: CUDA error: out of memory'],
    ] as const) {
      const answer = await jsonOf(await predict('djl', 'x', { 'x-kind': kind }));
      expect(answer.status, kind).toBe(status);
      expect(expectCleanError(answer.body)).toContain(message);
    }
    // The worker that answered them is still there.
    expect(await (await predict('djl', 'kiln', { 'x-kind': 'text' })).text()).toBe('hello kiln');
  });

  it('batches 8 concurrent requests into one handler call and routes each answer back', async () => {
    const answers = await Promise.all(
      Array.from({ length: 8 }, async (_, x) => {
        const { status, body } = await jsonOf(
          await predict('batching', JSON.stringify({ x }), { 'content-type': 'application/json' }),
        );
        expect(status).toBe(200);
        return body as { x: number; batch: number };
      }),
    );
    expect(answers.map((a) => a.x)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(answers.map((a) => a.batch)).toEqual(Array(8).fill(8));
  });

  it('hands v2 infer tensors to the same handler (no headers, so no X-Kind)', async () => {
    const response = await fetch(`${t.inference}/v2/models/djl/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        inputs: [{ name: 'x', datatype: 'FP32', shape: [2], data: [1, 2] }],
      }),
    });
    // The v2 protocol carries no X-Kind header: the handler raises, cleanly.
    const { status, body } = await jsonOf(response);
    expect(status).toBeGreaterThanOrEqual(500);
    expect(expectCleanError(body)).toContain('unknown kind None');
  });

  it('fails loading a model whose requirements.txt cannot be installed, saying why', async () => {
    const [described] = (await (await t.manage('/models/broken')).json()) as {
      status: string;
      error: string;
    }[];
    expect(described!.status).toBe('FAILED');
    expect(described!.error).toMatch(
      /requirements\.txt of broken could not be installed \(pip install\): .*kiln-never-published==1\.0/,
    );
    const { status, body } = await jsonOf(await predict('broken', 'x', {}));
    expect(status).toBeGreaterThanOrEqual(500);
    expect(expectCleanError(body)).toMatch(
      /failed to load.*requirements\.txt of broken could not be installed/,
    );
  });

  it('describes a Python model on /models/{m}: entry point, handler, Python version, venv', async () => {
    const [described] = (await (await t.manage('/models/djl')).json()) as {
      engine: string;
      workerGroups: { workers: { model: Record<string, unknown> }[] }[];
    }[];
    expect(described!.engine).toBe('Python');
    expect(described!.workerGroups[0]!.workers[0]!.model).toMatchObject({
      entryPoint: 'model.py',
      handler: 'handle',
      pythonVersion: expect.stringMatching(/^3\.\d+\.\d+$/),
      venv: null,
    });
  });

  it.skipIf(!hasSqueezenet)(
    'classifies the kitten with TorchScript SqueezeNet through get_as_image()',
    async () => {
      const image = fs.readFileSync(path.join(SQUEEZENET, 'images', 'kitten_224.png'));
      const { status, body } = await jsonOf(
        await predict('squeezenet', image, { 'content-type': 'image/png' }),
      );
      expect(status).toBe(200);
      const [top] = body as { className: string; probability: number }[];
      expect(top!.className).toBe('tabby, tabby cat');
      expect(top!.probability).toBeGreaterThan(0.9);
    },
  );

  it('splits Python model time into queue, IPC and handler metrics', async () => {
    const text = await (await fetch(`${t.metrics}/metrics`)).text();
    const count = (name: string) =>
      Number(new RegExp(`^${name}_count\\{model="djl"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
    expect(count('kiln_queue_seconds')).toBeGreaterThan(0);
    expect(count('kiln_python_ipc_seconds')).toBeGreaterThan(0);
    expect(count('kiln_python_handler_seconds')).toBe(count('kiln_python_ipc_seconds'));
  });
});
