import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultCharVocab, gptDecoderModel, tinyModel } from '@kiln/model-tools';
import { type TestServer, startTestServer, tempDir } from '../support/server-harness.js';

// A client that sends its whole body in one go learns of a refusal only after it has written
// it: the answer must still reach it, not a reset that makes its kernel drop the answer.
let t: TestServer;

beforeAll(async () => {
  const root = tempDir('refused-body');
  const tiny = await tinyModel(`${root}/tiny`);
  const gpt = await gptDecoderModel(`${root}/gpt`, {
    layers: 1,
    hidden: 16,
    heads: 2,
    maxLen: 64,
    vocab: defaultCharVocab().slice(1),
  });
  // Generation bodies have a limit of their own below max_request_size (from max_prompt_bytes).
  t = await startTestServer({
    models: [`tiny=${tiny}`, `gpt=${gpt.dir}`],
    config: { max_request_size: String(64 * 2 ** 20), max_prompt_bytes: '65536' },
  });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
});

/** Writes head and body at once, as most clients do, and reads whatever comes back. */
function sendWhole(
  path: string,
  body: Buffer,
  headers: Record<string, string>,
): Promise<{ status: number; body: string; error?: string }> {
  const { hostname, port } = new URL(t.inference);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let error: string | undefined;
    socket.on('connect', () => {
      const head =
        `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\n` +
        Object.entries(headers)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join('') +
        '\r\n';
      socket.write(head);
      if (headers['transfer-encoding']) {
        for (let at = 0; at < body.length; at += 1 << 20)
          socket.write(
            Buffer.concat([
              Buffer.from(`${(1 << 20).toString(16)}\r\n`),
              body.subarray(at, at + (1 << 20)),
              Buffer.from('\r\n'),
            ]),
            () => undefined,
          );
        socket.write('0\r\n\r\n', () => undefined);
      } else socket.write(body, () => undefined);
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({
        status,
        body: text.slice(text.indexOf('\r\n\r\n') + 4),
        ...(error ? { error } : {}),
      });
    });
  });
}

describe('a refused body is answered, never reset', () => {
  const body = Buffer.alloc(30 * 1024 * 1024, 0x61);

  it('answers 413 to every client that writes a 30 MiB body in one go, declared or chunked', async () => {
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        Array.from({ length: 16 }, (_, i) =>
          sendWhole(
            ['/v1/completions', '/v2/models/gpt/generate', '/predictions/gpt'][i % 3]!,
            body,
            i % 2
              ? { 'content-type': 'application/json', 'content-length': String(body.length) }
              : { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
          ),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 413));
      for (const answer of answers) expect(JSON.parse(answer.body)).toBeTypeOf('object');
    }
  });

  it('still closes the connection of a client that never stops sending', async () => {
    const { hostname, port } = new URL(t.inference);
    const socket = net.connect(Number(port), hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      'POST /predictions/tiny HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n' +
        `content-length: ${1024 ** 4}\r\n\r\n`,
    );
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const pump = setInterval(() => socket.writable && socket.write(chunk), 5);
    socket.on('error', () => undefined);
    let answer = '';
    socket.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    const closedAfter = await new Promise<number>((resolve) => {
      const started = performance.now();
      socket.once('close', () => resolve(performance.now() - started));
    });
    clearInterval(pump);
    expect(answer).toMatch(/^HTTP\/1\.1 413/);
    // Bounded: the server drops what follows a refusal for a while, then closes.
    expect(closedAfter).toBeLessThan(30_000);
  });
});
