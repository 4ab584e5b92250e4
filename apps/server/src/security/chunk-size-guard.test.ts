import { describe, expect, it } from 'vitest';
import { FramingScanner } from './chunk-size-guard.js';

const MAX = 1024;

/** Feeds the bytes in pieces of `step`, returning the first verdict that is not 'ok'. */
function scan(text: string, step = text.length): string {
  const scanner = new FramingScanner(MAX);
  const bytes = Buffer.from(text, 'latin1');
  for (let at = 0; at < bytes.length; at += step) {
    const verdict = scanner.push(bytes.subarray(at, at + step));
    if (verdict !== 'ok') return verdict;
  }
  return 'ok';
}

const chunked = (body: string) =>
  `POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${body}`;

describe('FramingScanner', () => {
  it('refuses a chunk announcing more than the limit, however the bytes are split', () => {
    for (const step of [1, 3, 7, 1000]) {
      expect(scan(chunked('FFFFFFFFFFFFFFFF\r\nabc'), step)).toBe('too-large');
      expect(scan(chunked('401\r\n'), step)).toBe('too-large');
      expect(scan(chunked('0000000000000000000000401;ext=1\r\n'), step)).toBe('too-large');
    }
  });

  it('follows keep-alive requests, fixed and chunked bodies, trailers and pipelining', () => {
    const requests =
      'GET /ping HTTP/1.1\r\nHost: x\r\n\r\n' +
      'POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n12345' +
      chunked('3\r\nabc\r\n400;x=y\r\n' + 'a'.repeat(1024) + '\r\n0\r\nTrailer: t\r\n\r\n') +
      // FFFF… inside a fixed-length body is data, not a chunk size.
      'POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 18\r\n\r\nFFFFFFFFFFFFFFFF\r\n';
    for (const step of [1, 5, 64, 5000]) expect(scan(requests, step)).toBe('ok');
    expect(scan(requests + chunked('fffff\r\n'))).toBe('too-large');
  });

  it('starts from the read that completed a request head, wherever the head began', () => {
    const line = 'POST /p HTTP/1.1\r\n';
    const start = (read: string) =>
      new FramingScanner(MAX).startAt(Buffer.from(read, 'latin1'), line);
    // An earlier pipelined request in the same read: its body's FFFF… is data, not a size.
    const earlier = 'POST /q HTTP/1.1\r\nContent-Length: 18\r\n\r\nFFFFFFFFFFFFFFFF\r\n';
    expect(start(earlier + chunked('3\r\nabc\r\n'))).toBe('ok');
    expect(start(earlier + chunked('FFFFFFFFFFFFFFFF\r\n'))).toBe('too-large');
    // The head began in an earlier read: the body starts after the blank line.
    expect(start('ked\r\n\r\nFFFFFFFFFFFFFFFF\r\n')).toBe('too-large');
    expect(start('ked\r\n\r\n10\r\n')).toBe('ok');
    expect(new FramingScanner(MAX).startInChunkedBody(Buffer.from('fffff\r\n'))).toBe('too-large');
  });

  it('stops watching (never refuses) what it cannot read', () => {
    expect(scan(chunked('zz\r\n'))).toBe('lost');
    expect(
      scan('POST /p HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nFFFFFFFFF\r\n'),
    ).toBe('lost');
    expect(scan(`GET /${'a'.repeat(70_000)}`, 1000)).toBe('lost');
  });
});
