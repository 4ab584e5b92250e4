import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ServingChunk, ServingInput } from '@kiln/core';
import { checkEngine } from '@kiln/testing';
import { probePython } from './probe.js';
import { TEST_PYTHON, loadTestModel, removeTestModels } from './test-support.js';

const { run } = await checkEngine('Python', () => probePython(TEST_PYTHON));

const dir = mkdtempSync(join(tmpdir(), 'kiln-python-stream-'));
afterAll(() => {
  removeTestModels();
  rmSync(dir, { recursive: true, force: true });
});

// Streams `count` items `pause` seconds apart, recording how many it has produced in the file
// `progress` names.
const STREAMING = `
import time
from djl_python import Input, Output

def handle(inputs: Input):
    if inputs.is_empty():
        return None
    request = inputs.get_as_json()
    def items():
        for i in range(request["count"]):
            with open(request["progress"], "w") as f:
                f.write(str(i + 1))
            yield "item%d\\n" % i
            time.sleep(request.get("pause", 0))
    return Output().add_property("x-stream", "yes").add_stream_content(items(), lambda t: t)
`;

const request = (count: number, progress: string, pause = 0): ServingInput => ({
  body: new TextEncoder().encode(JSON.stringify({ count, progress, pause })),
  contentType: 'application/json',
});

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);

describe.skipIf(!run)('a streamed answer (Output.add_stream_content)', () => {
  it('reaches the sink chunk by chunk, the next produced only once the last is taken', async () => {
    const model = await loadTestModel(STREAMING);
    const context = await model.newServingContext();
    try {
      const progress = join(dir, 'held');
      const chunks: ServingChunk[] = [];
      const producedWhenTaken: string[] = [];
      const [result] = await context.serve([request(3, progress)], {
        onChunk: [
          async (chunk) => {
            chunks.push(chunk);
            // Held for a while: the handler must not run ahead of it.
            await new Promise((resolve) => setTimeout(resolve, 50));
            producedWhenTaken.push(readFileSync(progress, 'utf8'));
          },
        ],
      });
      expect(result).toEqual({ ok: true, value: { type: 'streamed' } });
      expect(chunks.map((chunk) => text(chunk.body))).toEqual(['item0\n', 'item1\n', 'item2\n']);
      expect(producedWhenTaken).toEqual(['1', '2', '3']);
      // The first chunk says how the answer starts; the others carry only bytes.
      expect(chunks[0]!.head).toEqual({
        status: 200,
        contentType: undefined,
        headers: { 'x-stream': 'yes' },
      });
      expect(chunks.slice(1).every((chunk) => chunk.head === undefined)).toBe(true);
    } finally {
      await context.close();
    }
  });

  it('gets predict_timeout afresh with each chunk, not for the whole stream', async () => {
    const model = await loadTestModel(STREAMING, { predict_timeout: '1' });
    const context = await model.newServingContext();
    try {
      const pieces: string[] = [];
      // 4 items 0.4 s apart: 1.6 s in all, more than the 1 s each chunk may take.
      const [result] = await context.serve([request(4, join(dir, 'slow'), 0.4)], {
        onChunk: [(chunk) => void pieces.push(text(chunk.body))],
      });
      expect(result).toEqual({ ok: true, value: { type: 'streamed' } });
      expect(pieces).toHaveLength(4);
    } finally {
      await context.close();
    }
  });

  it('is gathered into one answer for a request without a sink', async () => {
    const model = await loadTestModel(STREAMING);
    const context = await model.newServingContext();
    try {
      const [result] = await context.serve([request(2, join(dir, 'gathered'))]);
      expect(result!.ok).toBe(true);
      const output = result!.ok ? result!.value : undefined;
      expect(output).toMatchObject({ type: 'bytes', headers: { 'x-stream': 'yes' } });
      expect(output?.type === 'bytes' && text(output.body)).toBe('item0\nitem1\n');
    } finally {
      await context.close();
    }
  });

  it('fails a batch, which cannot stream, and the worker goes on', async () => {
    const model = await loadTestModel(STREAMING, {}, 'batch_size=2\nmax_batch_delay=100\n');
    const context = await model.newServingContext();
    try {
      const batch = await context.serve([request(1, join(dir, 'a')), request(1, join(dir, 'b'))]);
      for (const result of batch) {
        expect(result.ok).toBe(false);
        expect(!result.ok && result.error.message).toMatch(/answers one request, not a batch/);
      }
      const [alone] = await context.serve([request(1, join(dir, 'c'))]);
      expect(alone!.ok).toBe(true);
    } finally {
      await context.close();
    }
  });
});
