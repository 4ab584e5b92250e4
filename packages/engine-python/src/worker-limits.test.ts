import { afterAll, describe, expect, it } from 'vitest';
import { KilnErrorCode, type KilnError, type ServingContext } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { probePython } from './probe.js';
import { TEST_PYTHON, loadTestModel, removeTestModels } from './test-support.js';

// Bounds on what one Python worker may cost: its answers' size (max_response_size), its
// memory (max_worker_rss_mb), and its time once nobody waits for its call (cancellation).
const PYTHON = TEST_PYTHON;
const { run } = await checkEngine('Python', () => probePython(PYTHON));

afterAll(removeTestModels);
const load = loadTestModel;

/** Calls the handler with a text body, as a request arrives; its text answer. */
async function ask(context: ServingContext, text: string, signal?: AbortSignal): Promise<string> {
  const body = new TextEncoder().encode(text);
  const [result] = await context.serve([{ body }], signal ? { signal } : {});
  if (!result!.ok) throw result!.error;
  const output = result!.value;
  if (output.type !== 'bytes') throw new Error(`not bytes: ${output.type}`);
  return Buffer.from(output.body).toString();
}

/** Resolves with the error its context dies of. */
function deathOf(context: ServingContext): Promise<KilnError> {
  return new Promise((resolve) => context.onDeath(resolve));
}

// `big N`: N MiB of answer; `frame`: a frame header announcing 1 GiB, written behind the
// worker's back; `leak N`: keeps N MiB more (written, so resident); `sleep`: 30 s;
// `stubborn`: sleeps on through the interrupt. Every answer else is the worker's pid.
const HANDLER = `
import os, struct, time
from djl_python import Output

kept = []

def handle(inputs):
    if inputs.is_empty():
        return None
    word, _, n = inputs.get_as_string().partition(" ")
    if word == "big":
        return Output().add(b"x" * (int(n) << 20))
    if word == "frame":
        os.write(4, struct.pack("<I", 1 << 30))
        time.sleep(30)
    if word == "leak":
        kept.append(b"x" * (int(n) << 20))
    if word == "sleep":
        time.sleep(30)
    if word == "stubborn":
        try:
            time.sleep(30)
        except BaseException:
            time.sleep(30)
    return Output().add(str(os.getpid()))
`;

describe.skipIf(!run)('Python worker limits', () => {
  it('refuses an answer over option.max_response_size with 507 naming the key; the worker goes on', async () => {
    const model = await load(HANDLER, { max_response_size: String(1 << 20) });
    const context = await model.newServingContext();
    const pid = await ask(context, 'pid');
    await expect(ask(context, 'big 8')).rejects.toMatchObject({
      code: KilnErrorCode.EngineError,
      message: expect.stringMatching(/more than max_response_size \(1048576 bytes\)/) as unknown,
      details: { httpStatus: 507 },
    });
    // The worker refused it itself: the same process answers next.
    expect(await ask(context, 'pid')).toBe(pid);
    expect(model.describe()).toMatchObject({ maxResponseBytes: 1 << 20 });
    await model.dispose();
  });

  it('takes the server-wide max_response_size from the model’s properties, under its option', async () => {
    const server = await load(HANDLER, {}, `max_response_size=${1 << 20}`);
    expect(server.describe()).toMatchObject({ maxResponseBytes: 1 << 20 });
    const own = await load(HANDLER, {}, `max_response_size=${1 << 20}\noption.max_response_size=5`);
    expect(own.describe()).toMatchObject({ maxResponseBytes: 5 });
    await expect(load(HANDLER, { max_response_size: 'lots' })).rejects.toMatchObject({
      code: KilnErrorCode.InvalidConfig,
      message: expect.stringContaining('option.max_response_size') as unknown,
    });
  });

  it('does not read a frame that announces more than the limit; the worker dies for the pool to replace', async () => {
    const model = await load(HANDLER, { max_response_size: String(1 << 20) });
    const context = await model.newServingContext();
    const death = deathOf(context);
    await ask(context, 'pid');
    await expect(ask(context, 'frame')).rejects.toMatchObject({
      message: expect.stringMatching(/1073741824 bytes passes max_response_size/) as unknown,
      details: { httpStatus: 507 },
    });
    expect(await death).toMatchObject({ code: KilnErrorCode.WorkerCrashed });
    await model.dispose();
  });

  it('ends a worker past option.max_worker_rss_mb once its call is answered', async () => {
    const model = await load(HANDLER, { max_worker_rss_mb: '150' });
    const context = await model.newServingContext();
    const death = deathOf(context);
    const pids: string[] = [];
    // 40 MiB kept per call: a worker passes 150 MiB within four calls, each one answered; the
    // worker then ends, and takes no more calls.
    let refused: unknown;
    for (let i = 0; i < 8 && refused === undefined; i++) {
      await ask(context, 'leak 40').then(
        (pid) => pids.push(pid),
        (error: unknown) => (refused = error),
      );
    }
    expect(pids.length).toBeGreaterThan(1);
    expect(pids.length).toBeLessThan(5);
    expect(new Set(pids).size).toBe(1);
    const ended = {
      code: KilnErrorCode.WorkerCrashed,
      message: expect.stringMatching(/more than max_worker_rss_mb \(150\)/) as unknown,
    };
    expect(refused).toMatchObject(ended);
    expect(await death).toMatchObject(ended);
    expect(model.describe()).toMatchObject({ maxWorkerRssBytes: 150 * 2 ** 20 });
    await model.dispose();
  });

  it('refuses to load a model whose worker is past max_worker_rss_mb once loaded', async () => {
    const model = await load(`kept = b"x" * (64 << 20)\ndef handle(inputs):\n    return None\n`, {
      max_worker_rss_mb: '20',
    });
    await expect(model.newExecutionContext()).rejects.toMatchObject({
      code: KilnErrorCode.ModelLoadFailed,
      message: expect.stringMatching(/more than max_worker_rss_mb \(20\)/) as unknown,
    });
  });

  it('interrupts a cancelled call; the same worker is free for the next one', async () => {
    const model = await load(HANDLER);
    const context = await model.newServingContext();
    const pid = await ask(context, 'pid');
    const controller = new AbortController();
    const asked = ask(context, 'sleep', controller.signal);
    setTimeout(() => controller.abort(), 200);
    const started = performance.now();
    await expect(asked).rejects.toMatchObject({ code: KilnErrorCode.Cancelled });
    const cancelMs = performance.now() - started;
    expect(await ask(context, 'pid')).toBe(pid);
    // Well before the handler's 30 s sleep would have ended.
    expect(cancelMs).toBeLessThan(15_000);
    await model.dispose();
  });

  it('kills a worker whose handler goes on after the interrupt: it dies for the pool to replace', async () => {
    const model = await load(HANDLER);
    const context = await model.newServingContext();
    const death = deathOf(context);
    await ask(context, 'pid');
    const controller = new AbortController();
    const asked = ask(context, 'stubborn', controller.signal);
    setTimeout(() => controller.abort(), 200);
    await expect(asked).rejects.toMatchObject({ code: KilnErrorCode.Cancelled });
    expect(await death).toMatchObject({
      code: KilnErrorCode.WorkerCrashed,
      message: expect.stringContaining('its cancelled call went on') as unknown,
    });
    await model.dispose();
  });

  it('refuses a call whose signal is already aborted without sending it', async () => {
    const model = await load(HANDLER);
    const context = await model.newServingContext();
    await expect(ask(context, 'sleep', AbortSignal.abort())).rejects.toMatchObject({
      code: KilnErrorCode.Cancelled,
    });
    expect(Number(await ask(context, 'pid'))).toBeGreaterThan(0);
    await model.dispose();
  });
});
