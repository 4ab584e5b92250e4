import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { terminalProgress } from './progress.js';
import { formatBytes } from './report/format.js';

/** A stream that says it is a terminal and keeps what is drawn on it. */
function fakeTerminal(): { stream: NodeJS.WriteStream; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      text += chunk.toString();
      done();
    },
  }) as unknown as NodeJS.WriteStream;
  Object.assign(stream, {
    isTTY: true,
    columns: 120,
    cursorTo: () => true,
    clearLine: () => true,
    moveCursor: () => true,
  });
  return { stream, text: () => text };
}

describe('terminalProgress', () => {
  it('prints whole steps and the unit, never raw fractional milliseconds', () => {
    const terminal = fakeTerminal();
    const progress = terminalProgress(terminal.stream);
    progress.start(8000, 'measuring 8 s', ' ms');
    progress.update(3924.478591);
    progress.stop();
    expect(terminal.text()).toContain('3924/8000 ms');
    expect(terminal.text()).not.toContain('3924.478591');
  });

  it('formats both counts with the given format, e.g. bytes in human units', () => {
    const terminal = fakeTerminal();
    const progress = terminalProgress(terminal.stream);
    progress.start(3 * 1024 * 1024, 'packing', formatBytes);
    progress.update(1.2 * 1024 * 1024);
    progress.stop();
    expect(terminal.text()).toContain('packing');
    expect(terminal.text()).toContain('1.2 MiB/3.0 MiB');
    expect(terminal.text()).not.toMatch(/\d{6,}/);
  });
});
