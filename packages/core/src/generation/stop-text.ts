/**
 * Follows generated text for stop strings. Text that could still become a stop string is
 * held back, so a streamed answer never shows part of one; `push` answers what may be shown
 * now, and `stopped` turns true once a stop string appeared (the text before it is final).
 */
export class StopText {
  private text = '';
  private shown = 0;
  stopped = false;

  constructor(private readonly stops: readonly string[]) {}

  /** Adds the next token's text; answers the newly showable text. */
  push(piece: string): string {
    if (this.stopped) return '';
    this.text += piece;
    let end = this.text.length;
    for (const stop of this.stops) {
      const at = this.text.indexOf(stop, Math.max(0, this.shown - stop.length + 1));
      if (at >= 0 && at < end) {
        end = at;
        this.stopped = true;
      }
    }
    if (this.stopped) {
      this.text = this.text.slice(0, end);
      return this.take(end);
    }
    // Hold back the longest tail that is a prefix of some stop string.
    let hold = 0;
    for (const stop of this.stops)
      for (let n = Math.min(stop.length - 1, this.text.length); n > hold; n--)
        if (this.text.endsWith(stop.slice(0, n))) {
          hold = n;
          break;
        }
    return this.take(this.text.length - hold);
  }

  /** Whatever is still held back (at the end of generation without a stop). */
  flush(): string {
    return this.take(this.text.length);
  }

  /** All text up to here (the answer, without the stop string). */
  get all(): string {
    return this.text;
  }

  private take(end: number): string {
    const out = this.text.slice(this.shown, end);
    this.shown = Math.max(this.shown, end);
    return out;
  }
}
