import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { KilnErrorCode } from '@kiln/core';
import { readBody } from './read-body.js';

const limits = { maxBytes: 1024, timeoutMs: 5000, idleTimeoutMs: 300 };
let server: http.Server | undefined;

afterEach(
  () => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())),
);

/** A server whose handler gives each request to `handle` and settles with what it returns. */
async function serve(
  handle: (req: http.IncomingMessage) => Promise<unknown>,
): Promise<{ port: number; outcome: Promise<unknown> }> {
  let settle!: (value: unknown) => void;
  const outcome = new Promise<unknown>((resolve) => (settle = resolve));
  server = http.createServer((req, res) => {
    handle(req).then(
      (value) => (settle({ value }), res.end()),
      (error: unknown) => (settle({ error }), res.end()),
    );
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, outcome };
}

/** Sends raw bytes on a new connection; returns the socket. */
function send(port: number, bytes: string): Promise<net.Socket> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(bytes);
      resolve(socket);
    });
    socket.on('error', () => undefined);
  });
}

const request = (body: string, length = body.length) =>
  `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${length}\r\n\r\n${body}`;

describe('readBody', () => {
  it('reads a body that arrived whole before it was read', async () => {
    const { port, outcome } = await serve(async (req) => {
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(req.complete).toBe(true);
      return (await readBody(req, limits)).toString();
    });
    const socket = await send(port, request('hello'));
    expect(await outcome).toEqual({ value: 'hello' });
    socket.destroy();
  });

  it('gives a body a buffer of its own, with byte alignAt on an 8-byte boundary', async () => {
    for (const alignAt of [0, 3, 8, 13]) {
      const { port, outcome } = await serve(async (req) => {
        const body = await readBody(req, limits, { alignAt });
        return {
          text: body.toString(),
          aligned: (body.byteOffset + alignAt) % 8 === 0,
          own: body.buffer.byteLength === body.length + body.byteOffset,
        };
      });
      const socket = await send(port, request('0123456789abcdef'));
      expect(await outcome).toEqual({
        value: { text: '0123456789abcdef', aligned: true, own: true },
      });
      socket.destroy();
      await new Promise<void>((resolve) => server!.close(() => resolve()));
      server = undefined;
    }
  });

  it('fails at once, not after a timeout, when the client left before the body was read', async () => {
    const { port, outcome } = await serve(async (req) => {
      await new Promise((resolve) => req.once('close', resolve));
      const started = performance.now();
      try {
        return await readBody(req, limits);
      } finally {
        expect(performance.now() - started).toBeLessThan(limits.idleTimeoutMs);
      }
    });
    const socket = await send(port, request('hello'));
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.destroy();
    const { error } = (await outcome) as { error: { code: string } };
    expect(error.code).toBe(KilnErrorCode.Cancelled);
  });

  it('still answers a body that stalls with a timeout', async () => {
    const { port, outcome } = await serve((req) => readBody(req, limits));
    const socket = await send(port, request('hel', 5));
    const { error } = (await outcome) as { error: { code: string } };
    expect(error.code).toBe(KilnErrorCode.RequestTimeout);
    socket.destroy();
  });
});
