import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServerConfig } from '@kiln/server';
import { checkEngine } from '@kiln/testing';
import {
  type TestServer,
  expectCleanError,
  jsonOf,
  sleep,
  startTestServer,
  tempDir,
} from '../support/server-harness.js';

// What a Python handler may cost the server: an answer's size (max_response_size), a worker's
// memory (max_worker_rss_mb), and a worker's time once its client has gone.
const PYTHON = '/usr/bin/python3';
const { run } = await checkEngine('Python', () =>
  Promise.resolve(fs.existsSync(PYTHON) ? null : `${PYTHON} is absent`),
);

// `big N`: an answer of N KiB; `leak N`: N MiB more kept for good (written, so resident);
// `sleep`: 30 s. Every answer else is the worker's pid.
const HANDLER = `
import os, time
from djl_python import Output

kept = []

def handle(inputs):
    if inputs.is_empty():
        return None
    word, _, n = inputs.get_as_string().partition(" ")
    if word == "big":
        return Output().add(b"x" * (int(n) << 10))
    if word == "leak":
        kept.append(b"x" * (int(n) << 20))
    if word == "sleep":
        time.sleep(30)
    return Output().add(str(os.getpid()))
`;

const LIMIT = 1 << 20;
let t: TestServer;

beforeAll(async () => {
  if (!run) return;
  const root = tempDir('python-limits');
  const models: Record<string, string> = {
    answers: '',
    leaky: 'option.max_worker_rss_mb=150\n',
    // One worker, so that the request after a cancelled one needs the same worker.
    slow: 'minWorkers=1\nmaxWorkers=1\n',
  };
  const urls = Object.entries(models).map(([name, properties]) => {
    const dir = path.join(root, name);
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'model.py'), HANDLER);
    fs.writeFileSync(
      path.join(dir, 'serving.properties'),
      `option.pythonExecutable=${PYTHON}\n${properties}`,
    );
    return `${name}::Python=${dir}`;
  });
  t = await startTestServer({ models: urls, config: { max_response_size: String(LIMIT) } });
  // Registering runs a Python probe per model: on a busy machine it takes a while.
  for (let i = 0; i < 600 && t.server.models.list().length < urls.length; i++) await sleep(50);
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
});

function ask(model: string, text: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${t.inference}/predictions/${model}`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain' },
    body: text,
    ...(signal ? { signal } : {}),
  });
}

/** Resident memory, garbage collected first when `collect` (what is left of a request then). */
function rss(collect: boolean): number {
  if (collect) globalThis.gc?.();
  return process.memoryUsage().rss;
}

describe('max_response_size and max_worker_rss_mb in config.properties', () => {
  it('default to 4 × max_request_size and no memory limit; a bad value is refused', () => {
    const config = loadServerConfig({ env: {}, overrides: { max_request_size: '1000' } });
    expect(config.maxResponseSize).toBe(4000);
    expect(config.maxWorkerRssMb).toBeUndefined();
    const set = loadServerConfig({
      env: { KILN_MAX_WORKER_RSS_MB: '512' },
      overrides: { max_response_size: '10' },
    });
    expect(set).toMatchObject({ maxResponseSize: 10, maxWorkerRssMb: 512 });
    expect(() => loadServerConfig({ env: {}, overrides: { max_response_size: '0' } })).toThrow(
      /max_response_size/,
    );
  });
});

describe.skipIf(!run)('Python handlers bounded over HTTP', () => {
  it('answers 507 naming max_response_size to an answer over it, without holding the answer', async () => {
    expect((await ask('answers', 'pid')).status).toBe(200);
    const before = rss(true);
    const { status, body } = await jsonOf(await ask('answers', `big ${48 * 1024}`));
    // Not collected: an answer read and dropped would still count.
    const grown = rss(false) - before;
    expect(status).toBe(507);
    expect(expectCleanError(body)).toContain('max_response_size (1048576 bytes)');
    // 48 MiB were refused in the worker: the server's memory did not take them.
    expect(grown).toBeLessThan(24 * 2 ** 20);
    // Under the limit, an answer goes out whole.
    const half = await ask('answers', 'big 512');
    expect(half.status).toBe(200);
    expect((await half.arrayBuffer()).byteLength).toBe(512 * 1024);
  });

  it('replaces a leaking worker past option.max_worker_rss_mb and answers every request', async () => {
    const pids: string[] = [];
    for (let i = 0; i < 8; i++) {
      const response = await ask('leaky', 'leak 40');
      expect(response.status).toBe(200);
      pids.push(await response.text());
    }
    expect(new Set(pids).size).toBeGreaterThan(1);
  });

  it('frees the worker of a client that disconnected long before predict_timeout', async () => {
    const pid = await (await ask('slow', 'pid')).text();
    const controller = new AbortController();
    const gone = ask('slow', 'sleep', controller.signal).catch(() => undefined);
    // The handler is asleep in the only worker when its client leaves.
    await sleep(500);
    const started = performance.now();
    controller.abort();
    await gone;
    const next = await ask('slow', 'pid');
    const waitedMs = performance.now() - started;
    expect(next.status).toBe(200);
    // Interrupted, not replaced: the same process answers.
    expect(await next.text()).toBe(pid);
    // Well before the 30 s the handler would have slept.
    expect(waitedMs).toBeLessThan(15_000);
  });
});
