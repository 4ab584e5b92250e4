import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NDList, Tensor, decodeNDList, decodeNpz, encodeNDList, encodeNpz } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { type TestServer, jsonOf, startTestServer, tempDir } from '../support/server-harness.js';

// Handlers written only against DJL Serving's djl_python API (Input, Output, PairList,
// SessionManager, np_util), served unchanged over real HTTP, answered as DJL Serving answers.
const PYTHON = '/usr/bin/python3';
const { run } = await checkEngine('Python', () => {
  try {
    execFileSync(PYTHON, ['-c', 'import numpy'], { stdio: 'ignore' });
    return Promise.resolve(null);
  } catch {
    return Promise.resolve(`${PYTHON} cannot import numpy (apt-get install python3-numpy)`);
  }
});

const FIXTURES = fileURLToPath(new URL('../fixtures/djl-handlers', import.meta.url));
const HANDLERS = ['probe', 'tensors', 'stateful', 'content', 'answers'];

let t: TestServer;
let sessionsPath: string;

beforeAll(async () => {
  if (!run) return;
  const root = tempDir('djl-handlers');
  sessionsPath = path.join(root, 'sessions');
  const urls = HANDLERS.map((name) => {
    const dir = path.join(root, name);
    fs.mkdirSync(dir);
    fs.copyFileSync(path.join(FIXTURES, name, 'model.py'), path.join(dir, 'model.py'));
    const sessions = name === 'stateful' ? `option.sessions_path=${sessionsPath}\n` : '';
    fs.writeFileSync(
      path.join(dir, 'serving.properties'),
      `option.pythonExecutable=${PYTHON}\n${sessions}`,
    );
    return `${name}::Python=${dir}`;
  });
  t = await startTestServer({ models: urls });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
});

function predict(model: string, body: Uint8Array | string, headers: Record<string, string> = {}) {
  return fetch(`${t.inference}/predictions/${model}`, { method: 'POST', headers, body });
}

async function bytesOf(response: Response): Promise<Uint8Array> {
  return new Uint8Array(await response.arrayBuffer());
}

const x = new Tensor('float32', new Float32Array([1, 2, 3]), [3]);
const flags = new Tensor('bool', new Uint8Array([1, 0]), [2]);

/** An ndlist as DJL's Python encoder writes it: booleans named BOOL (Java's name is BOOLEAN). */
function djlPythonNDList(list: NDList): Uint8Array {
  const java = Buffer.from(encodeNDList(list));
  const boolean = Buffer.from([0, 7, ...Buffer.from('BOOLEAN')]);
  const bool = Buffer.from([0, 4, ...Buffer.from('BOOL')]);
  const parts: Buffer[] = [];
  let from = 0;
  for (let at = java.indexOf(boolean); at >= 0; at = java.indexOf(boolean, from)) {
    parts.push(java.subarray(from, at), bool);
    from = at + boolean.length;
  }
  parts.push(java.subarray(from));
  return new Uint8Array(Buffer.concat(parts));
}

describe.skipIf(!run)('DJL djl_python handlers over HTTP', () => {
  it('loads a handler that probes its first input: get_as_bytes() is None on the load call', async () => {
    const response = await predict('probe', 'kiln');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await response.text()).toBe('KILN');
  });

  it("takes DJL's keyword names: add_as_numpy(np_list=…) answers DJL's ndlist", async () => {
    const response = await predict('tensors', djlPythonNDList(NDList.of(x, flags)), {
      'content-type': 'tensor/ndlist',
    });
    const bytes = await bytesOf(response);
    expect(response.status, Buffer.from(bytes).toString()).toBe(200);
    expect(response.headers.get('content-type')).toBe('tensor/ndlist');
    const [y, z] = decodeNDList(bytes).tensors;
    expect([...(y!.data as Float32Array)]).toEqual([2, 4, 6]);
    // True × 2 in numpy is an int64 2.
    expect([...(z!.data as BigInt64Array)]).toEqual([2n, 0n]);
  });

  it('reads an answer labelled tensor/ndlist whose booleans are named BOOL', async () => {
    const response = await predict('tensors', djlPythonNDList(NDList.of(flags)), {
      'content-type': 'tensor/ndlist',
      'x-answer': 'echo',
    });
    const bytes = await bytesOf(response);
    expect(response.status, Buffer.from(bytes).toString()).toBe(200);
    const [echoed] = decodeNDList(bytes).tensors;
    expect(echoed!.dtype).toBe('bool');
    expect([...(echoed!.data as Uint8Array)]).toEqual([1, 0]);
  });

  it('takes add_as_npz(np_list=…) and answers npz where asked', async () => {
    const response = await predict('tensors', encodeNpz(NDList.of(x)), {
      'content-type': 'tensor/npz',
      'x-answer': 'npz',
      accept: 'tensor/npz',
    });
    const bytes = await bytesOf(response);
    expect(response.status, Buffer.from(bytes).toString()).toBe(200);
    expect(response.headers.get('content-type')).toBe('tensor/npz');
    expect([...(decodeNpz(bytes).get(0).data as Float32Array)]).toEqual([2, 4, 6]);
  });

  it('answers an npz request without Accept as npz, as DJL does', async () => {
    for (const answer of ['numpy', 'npz']) {
      const response = await predict('tensors', encodeNpz(NDList.of(x)), {
        'content-type': 'tensor/npz',
        'x-answer': answer,
      });
      const bytes = await bytesOf(response);
      expect(response.status, Buffer.from(bytes).toString()).toBe(200);
      expect(response.headers.get('content-type'), answer).toBe('tensor/npz');
      expect([...(decodeNpz(bytes).get(0).data as Float32Array)]).toEqual([2, 4, 6]);
    }
  });

  it("keeps a session's state with DJL's SessionManager until it is closed", async () => {
    const first = await jsonOf(await predict('stateful', 'x'));
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ count: 1 });
    const id = first.headers.get('x-session-id')!;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(fs.existsSync(path.join(sessionsPath, id))).toBe(true);
    const second = await jsonOf(await predict('stateful', 'x', { 'x-session-id': id }));
    expect(second.body).toEqual({ count: 2 });
    const closed = await jsonOf(
      await predict('stateful', 'x', { 'x-session-id': id, 'x-close': 'true' }),
    );
    expect(closed.body).toEqual({ closed: id });
    expect(fs.existsSync(path.join(sessionsPath, id))).toBe(false);
    const gone = await predict('stateful', 'x', { 'x-session-id': id });
    expect(gone.status).toBe(404);
    expect(await gone.text()).toContain(`session ${id} not found`);
  });

  it("hands the contents as a PairList and answers through np_util's ndlist", async () => {
    const response = await predict('content', encodeNDList(NDList.of(x)), {
      'content-type': 'tensor/ndlist',
    });
    const bytes = await bytesOf(response);
    expect(response.status, Buffer.from(bytes).toString()).toBe(200);
    expect(response.headers.get('x-keys')).toBe('data');
    expect([...(decodeNDList(bytes).get(0).data as Float32Array)]).toEqual([2, 3, 4]);
  });

  it('names the handler function: get_function_name() is handle', async () => {
    const response = await predict('content', encodeNDList(NDList.of(x)));
    expect(response.status).toBe(200);
    expect(response.headers.get('x-function')).toBe('handle');
  });

  it("adds each query parameter as a content before the body, as DJL's RequestParser does", async () => {
    const response = await fetch(`${t.inference}/predictions/content?stream=true`, {
      method: 'POST',
      body: encodeNDList(NDList.of(x)),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-keys')).toBe('stream,data');
  });

  it("answers Output.error() with its code and the error's words", async () => {
    const response = await predict('answers', 'x', { 'x-kind': 'error' });
    expect(response.status).toBe(424);
    expect(await response.text()).toContain('the input is refused');
  });

  it("answers Output.error() with DJL's JSON body", async () => {
    const { status, body, headers } = await jsonOf(
      await predict('answers', 'x', { 'x-kind': 'error' }),
    );
    expect(status).toBe(424);
    expect(headers.get('content-type')).toMatch(/^application\/json/);
    expect(body).toEqual({
      code: 424,
      message: 'prediction failure',
      error: 'the input is refused',
    });
  });

  it('answers a str or bytes returned instead of an Output 424, naming its type', async () => {
    for (const [kind, type] of [
      ['str', "<class 'str'>"],
      ['bytes', "<class 'bytes'>"],
    ] as const) {
      const response = await predict('answers', 'x', { 'x-kind': kind });
      expect(response.status, kind).toBe(424);
      expect(await response.text()).toContain(`Invalid output type: ${type}`);
    }
  });

  it('sends bytes added without a content type as they are, unlabelled', async () => {
    const response = await predict('answers', 'x', { 'x-kind': 'raw' });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBeNull();
    expect([...(await bytesOf(response))]).toEqual([0, 1, ...Buffer.from('raw')]);
  });

  it("runs an Output's finalize function after its answer is sent", async () => {
    const first = await jsonOf(await predict('answers', 'x', { 'x-kind': 'finalize' }));
    expect(first.body).toEqual({ finalized: [] });
    const second = await jsonOf(await predict('answers', 'x', { 'x-kind': 'finalize' }));
    expect(second.body).toEqual({ finalized: ['done'] });
  });
});
