import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { threadId } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Tensor, decodeTensors, encodeNpy } from '@kiln/core';
import { PROBE_FILE } from '../support/buffer-probe-engine.js';
import { type TestServer, startTestServer, tempDir } from '../support/server-harness.js';

// A 600 kB request tensor travels from the socket to the engine, on a worker thread or inline
// on the main thread (placement). The one copy allowed is joining the socket's chunks into
// the request body; past it, decoders view the body in place and the pool moves the body's
// buffer to the worker. The probe engine reports where its input lives: a view into a buffer
// as large as the whole HTTP body means nothing copied the tensor after the body was read.
const ELEMENTS = 150_000; // 600 kB of float32

for (const placement of ['thread', 'inline'] as const) {
  describe(`a 600 kB request tensor between the socket and the engine (${placement})`, () => {
    let server: TestServer;

    beforeAll(async () => {
      const dir = tempDir('copies');
      fs.writeFileSync(path.join(dir, PROBE_FILE), '');
      fs.writeFileSync(
        path.join(dir, 'serving.properties'),
        `engine=BufferProbe\nplacement=${placement}\n`,
      );
      server = await startTestServer({
        models: [`probe=${dir}`],
        engineModules: [pathToFileURL(path.resolve('support/buffer-probe-engine.ts')).href],
      });
      await server.settled();
    });
    afterAll(() => server?.stop());

    const tensor = new Tensor(
      'float32',
      Float32Array.from({ length: ELEMENTS }, (_, i) => i),
      [ELEMENTS],
      'x',
    );

    function expectPlacement(engineThread: number): void {
      if (placement === 'inline') expect(engineThread).toBe(threadId);
      else expect(engineThread).not.toBe(threadId);
    }

    async function where(response: Response): Promise<number[]> {
      expect(response.status).toBe(200);
      const bytes = new Uint8Array(await response.arrayBuffer());
      return Array.from(decodeTensors(bytes).get(0).data as Float64Array);
    }

    it('is not copied after the body is read on /predictions (npy)', async () => {
      const body = encodeNpy(tensor);
      const [bytes, bufferBytes, offset, engineThread] = await where(
        await fetch(`${server.inference}/predictions/probe`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-npy', accept: 'application/x-npy' },
          body,
        }),
      );
      expect(bytes).toBe(ELEMENTS * 4);
      // The tensor is a view into the request body itself, past the npy header.
      expect(bufferBytes).toBe(body.byteLength);
      expect(offset).toBe(body.byteLength - ELEMENTS * 4);
      expectPlacement(engineThread!);
    });

    it('is not copied after the body is read on v2 infer with binary data', async () => {
      const header = Buffer.from(
        JSON.stringify({
          inputs: [
            {
              name: 'x',
              shape: [ELEMENTS],
              datatype: 'FP32',
              parameters: { binary_data_size: ELEMENTS * 4 },
            },
          ],
          outputs: [{ name: 'where', parameters: { binary_data: false } }],
        }),
      );
      const data = Buffer.from(tensor.data.buffer);
      const response = await fetch(`${server.inference}/v2/models/probe/infer`, {
        method: 'POST',
        headers: {
          'content-type': 'application/octet-stream',
          'inference-header-content-length': String(header.byteLength),
        },
        body: Buffer.concat([header, data]),
      });
      expect(response.status).toBe(200);
      const reply = (await response.json()) as { outputs: { data: number[] }[] };
      const [bytes, bufferBytes, offset, engineThread] = reply.outputs[0]!.data;
      expect(bytes).toBe(ELEMENTS * 4);
      // The body sits a few bytes into its buffer, so that the data after the header is aligned.
      const pad = bufferBytes! - (header.byteLength + ELEMENTS * 4);
      expect(pad).toBeGreaterThanOrEqual(0);
      expect(pad).toBeLessThan(8);
      expect(offset).toBe(pad + header.byteLength);
      expectPlacement(engineThread!);
    });
  });
}
