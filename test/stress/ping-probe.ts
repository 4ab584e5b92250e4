import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** What a /ping probe saw while it ran. */
export interface PingReport {
  readonly probes: number;
  /** Probes answered after `stallMs`, or not at all. */
  readonly stalls: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** The storm's phase during each stall, and how long the probe waited. */
  readonly stallsByPhase: readonly { phase: string; ms: number }[];
}

const PROBE = fileURLToPath(new URL('./ping-probe-process.mjs', import.meta.url));

/**
 * Asks `GET /ping` every `intervalMs` on a fresh connection, one probe at a time, while the
 * storm runs: a server whose event loop is busy answers late or not at all. The probe runs in
 * a process of its own, so that the storm's own work is not counted as the server's.
 */
export function startPingProbe(
  base: string,
  options: { intervalMs?: number; stallMs?: number } = {},
): { phase(name: string): void; stop(): Promise<PingReport> } {
  const child = fork(
    PROBE,
    [base, String(options.intervalMs ?? 250), String(options.stallMs ?? 1000)],
    {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      // Plain JavaScript: no loader of the parent's is needed.
      execArgv: [],
    },
  );
  const report = new Promise<PingReport>((resolve, reject) => {
    child.once('message', (message) => resolve(message as PingReport));
    child.once('exit', (code) =>
      reject(new Error(`the /ping probe exited (${code}) without a report`)),
    );
  });
  // Read when the probe stops; a probe that died before then fails that read, not the process.
  report.catch(() => undefined);
  return {
    phase: (name) => child.send({ phase: name }),
    stop: () => {
      child.send({ stop: true });
      return report;
    },
  };
}
