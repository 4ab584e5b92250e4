import cliProgress from 'cli-progress';

/** Writes a count of steps for people, e.g. bytes as `1.2 MiB`. */
export type StepFormat = (steps: number) => string;

/** Where long runs report how far they are. */
export interface ProgressReporter {
  /**
   * Starts a new bar of `total` steps; `unit` (e.g. ' ms') follows the counter, or formats
   * both counts (e.g. formatBytes, for `1.2 MiB/3.0 MiB`).
   */
  start(total: number, label: string, unit?: string | StepFormat): void;
  /** Sets the steps done, with a short status beside the bar. */
  update(done: number, status?: string): void;
  stop(): void;
}

export const NO_PROGRESS: ProgressReporter = Object.freeze({
  start: () => undefined,
  update: () => undefined,
  stop: () => undefined,
});

/**
 * A progress bar on the terminal (stderr, so stdout stays clean for --json). Nothing is
 * drawn when stderr is not a TTY: logs and pipes get no control characters.
 */
export function terminalProgress(stream: NodeJS.WriteStream = process.stderr): ProgressReporter {
  if (!stream.isTTY) return NO_PROGRESS;
  let bar: cliProgress.SingleBar | undefined;
  let format: StepFormat | undefined;
  return {
    start(total, label, unit = '') {
      bar?.stop();
      format = typeof unit === 'function' ? unit : undefined;
      // Formatted counts travel as payload: cli-progress prints {value} and {total} raw.
      const counts = typeof unit === 'function' ? '{done}/{all}' : `{value}/{total}${unit}`;
      bar = new cliProgress.SingleBar(
        {
          stream,
          format: `${label} [{bar}] {percentage}% ${counts} {status}`,
          barsize: 30,
          hideCursor: true,
          clearOnComplete: true,
        },
        cliProgress.Presets.shades_classic,
      );
      const all = format?.(total);
      bar.start(Math.max(1, Math.round(total)), 0, { status: '', done: format?.(0), all });
    },
    update(done, status = '') {
      // Whole steps: a duration counted in fractional milliseconds would print every digit.
      bar?.update(Math.round(done), { status, done: format?.(done) });
    },
    stop() {
      bar?.stop();
      bar = undefined;
    },
  };
}
