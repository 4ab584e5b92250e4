import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { terminalProgress } from './progress.js';

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
});
