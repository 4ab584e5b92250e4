import cliProgress from 'cli-progress';

/** Where long runs report how far they are. */
export interface ProgressReporter {
  /** Starts a new bar of `total` steps; `unit` (e.g. ' ms') follows the counter. */
  start(total: number, label: string, unit?: string): void;
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
  return {
    start(total, label, unit = '') {
      bar?.stop();
      bar = new cliProgress.SingleBar(
        {
          stream,
          format: `${label} [{bar}] {percentage}% {value}/{total}${unit} {status}`,
          barsize: 30,
          hideCursor: true,
          clearOnComplete: true,
        },
        cliProgress.Presets.shades_classic,
      );
      bar.start(Math.max(1, Math.round(total)), 0, { status: '' });
    },
    update(done, status = '') {
      // Whole steps: a duration counted in fractional milliseconds would print every digit.
      bar?.update(Math.round(done), { status });
    },
    stop() {
      bar?.stop();
      bar = undefined;
    },
  };
}
