import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { threadId } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadInferencePackage } from '@kiln/server';
import { PROBE_FILE } from '../support/buffer-probe-engine.js';
import { type V2GrpcClient, v2GrpcClient } from '../support/grpc-client.js';
import { type TestServer, startTestServer, tempDir } from '../support/server-harness.js';

// A 600 kB request tensor travels from a gRPC client to the engine, on a worker thread or
// inline on the main thread (placement). The one copy allowed is grpc-js joining the HTTP/2
// frames into the message: past it, the main thread reads only the model's name, the pool
// moves the message's buffer to the worker, and the worker views the raw tensor in place.
// The probe engine reports where its input lives: a view into a buffer as large as the framed
// message (5 bytes of gRPC length prefix, then the message) means nothing copied the tensor.
// A message whose raw bytes are not 4-byte aligned in that buffer has them moved down over its
// own framing, inside the same buffer.
const ELEMENTS = 150_000; // 600 kB of float32
const FRAME_PREFIX = 5;

const requestCodec = (
  loadInferencePackage().GRPCInferenceService as unknown as {
    service: { ModelInfer: { requestSerialize(message: unknown): Buffer } };
  }
).service.ModelInfer;

const data = Buffer.from(Float32Array.from({ length: ELEMENTS }, (_, i) => i).buffer);
/** The values' sum, exact in float64: what the engine must see, moved or not. */
const SUM = (ELEMENTS * (ELEMENTS - 1)) / 2;

/** A request whose tensor starts `misalignment` bytes past a 4-byte boundary in the frame. */
function request(misalignment: number): { message: Record<string, unknown>; tensorAt: number } {
  for (let pad = 0; pad < 8; pad++) {
    const message = {
      model_name: 'probe',
      id: 'x'.repeat(pad),
      inputs: [{ name: 'x', datatype: 'FP32', shape: [ELEMENTS] }],
      raw_input_contents: [data],
    };
    const bytes = requestCodec.requestSerialize(message);
    // raw_input_contents is the last field, so the tensor ends the message.
    const tensorAt = FRAME_PREFIX + bytes.byteLength - data.byteLength;
    if (tensorAt % 4 === misalignment) return { message, tensorAt };
  }
  throw new Error(`no padding puts the tensor ${misalignment} bytes past alignment`);
}

for (const placement of ['thread', 'inline'] as const) {
  describe(`a 600 kB gRPC request tensor between the socket and the engine (${placement})`, () => {
    let server: TestServer;
    let grpc: V2GrpcClient;

    beforeAll(async () => {
      const dir = tempDir('grpc-copies');
      fs.writeFileSync(path.join(dir, PROBE_FILE), '');
      fs.writeFileSync(
        path.join(dir, 'serving.properties'),
        `engine=BufferProbe\nplacement=${placement}\n`,
      );
      server = await startTestServer({
        models: [`probe=${dir}`],
        engineModules: [pathToFileURL(path.resolve('support/buffer-probe-engine.ts')).href],
        config: { grpc_address: '127.0.0.1:0' },
      });
      await server.settled();
      grpc = v2GrpcClient(server.server.urls.grpc!);
    });
    afterAll(async () => {
      grpc?.close();
      await server?.stop();
    });

    /** [input bytes, its buffer's bytes, its offset, engine thread id, sum], as the probe saw them. */
    async function where(message: Record<string, unknown>): Promise<number[]> {
      const reply = await grpc.call<{ outputs: { name: string }[]; raw_output_contents: Buffer[] }>(
        'ModelInfer',
        message,
      );
      expect(reply.outputs.map((o) => o.name)).toEqual(['where']);
      const raw = reply.raw_output_contents[0]!;
      const values = Array.from(
        new Float64Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength)),
      );
      const engineThread = values[3]!;
      if (placement === 'inline') expect(engineThread).toBe(threadId);
      else expect(engineThread).not.toBe(threadId);
      return values;
    }

    it('is not copied after grpc-js reads the message when its bytes are aligned', async () => {
      const { message, tensorAt } = request(0);
      const [bytes, bufferBytes, offset, , sum] = await where(message);
      expect(bytes).toBe(ELEMENTS * 4);
      expect(sum).toBe(SUM);
      // The tensor is a view into the framed message grpc-js assembled, where the client put it.
      expect(bufferBytes).toBe(tensorAt + ELEMENTS * 4);
      expect(offset).toBe(tensorAt);
    });

    it('is moved into alignment inside the same buffer, not copied, when the client put it off alignment', async () => {
      for (const misalignment of [1, 2, 3]) {
        const { message, tensorAt } = request(misalignment);
        const [bytes, bufferBytes, offset, , sum] = await where(message);
        expect(bytes).toBe(ELEMENTS * 4);
        expect(sum).toBe(SUM);
        // Still the framed message's buffer: the tensor moved down over the message's framing.
        expect(bufferBytes).toBe(tensorAt + ELEMENTS * 4);
        expect(offset).toBe(tensorAt - misalignment);
      }
    });
  });
}
