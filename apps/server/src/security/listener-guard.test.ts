import type { AddressInfo } from 'node:net';
import net from 'node:net';
import type http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createGuardedServer } from './listener-guard.js';

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A guarded server whose handler echoes the body's length once the body has arrived. */
async function echoServer(): Promise<number> {
  const server = createGuardedServer(
    (req, res) => {
      let bytes = 0;
      req.on('data', (chunk: Buffer) => (bytes += chunk.length));
      req.on('end', () => res.end(JSON.stringify({ bytes })));
    },
    { maxConnections: 10, headersTimeoutMs: 5000, requestTimeoutMs: 60_000, maxBodyBytes: 1024 },
  );
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** Writes the pieces with a pause between them; resolves with everything the server sent. */
function converse(port: number, pieces: string[], pauseMs = 60): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('latin1');
    socket.on('data', (text: string) => (answer += text));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
    socket.once('connect', async () => {
      for (const piece of pieces) {
        if (socket.destroyed) break;
        socket.write(piece);
        await new Promise((r) => setTimeout(r, pauseMs));
      }
      setTimeout(() => socket.end(), 300);
    });
  });
}

const head = (extra: string) => `POST /p HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`;
const statuses = (answer: string) => [...answer.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1]);

describe('createGuardedServer: chunk sizes', () => {
  it('refuses an absurd chunk size sent with the headers, or in a later packet', async () => {
    const port = await echoServer();
    for (const pieces of [
      [`${head('Transfer-Encoding: chunked\r\n')}FFFFFFFFFFFFFFFF\r\nabc`],
      [head('Transfer-Encoding: chunked\r\n'), 'FFFFFFFFFFFFFFFF\r\n', 'abc'],
      [`${head('Transfer-Encoding: chunked\r\n')}3\r\nabc\r\n`, '401\r\n'],
    ]) {
      const answer = await converse(port, pieces);
      expect(statuses(answer)).toEqual(['413']);
      expect(answer).toContain('"type":"PayloadTooLarge"');
    }
  });

  it('refuses it on a keep-alive connection after requests with fixed-length bodies', async () => {
    const port = await echoServer();
    const answer = await converse(port, [
      `${head('Content-Length: 5\r\n')}hello`,
      `${head('Content-Length: 18\r\n')}FFFFFFFFFFFFFFFF\r\n`,
      `${head('Transfer-Encoding: chunked\r\n')}FFFFFFFFFFFFFFFF\r\n`,
    ]);
    expect(statuses(answer)).toEqual(['200', '200', '413']);
  });

  it('serves chunked bodies within the limit, and the requests after them', async () => {
    const port = await echoServer();
    const answer = await converse(port, [
      `${head('Transfer-Encoding: chunked\r\n')}3\r\nabc\r\n`,
      '4\r\ndefg\r\n0\r\n\r\n',
      `${head('Content-Length: 2\r\n')}hi`,
      // Pipelined: a second chunked request in the same packet as the end of the first.
      `${head('Transfer-Encoding: chunked\r\n')}1\r\nx\r\n0\r\n\r\n${head('Transfer-Encoding: chunked\r\n')}2\r\nyz\r\n0\r\n\r\n`,
    ]);
    expect(statuses(answer)).toEqual(['200', '200', '200', '200']);
    expect(answer).toContain('{"bytes":7}');
    expect(answer).toContain('{"bytes":2}');
    expect(answer).toContain('{"bytes":1}');
  });
});
