import http from 'node:http';

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

/**
 * Asks `GET /ping` every `intervalMs` on a fresh connection, one probe at a time, while the
 * storm runs: a server whose event loop is busy answers late or not at all.
 */
export function startPingProbe(
  base: string,
  options: { intervalMs?: number; stallMs?: number } = {},
): { phase(name: string): void; stop(): Promise<PingReport> } {
  const intervalMs = options.intervalMs ?? 250;
  const stallMs = options.stallMs ?? 1000;
  const times: number[] = [];
  const stallsByPhase: { phase: string; ms: number }[] = [];
  let phase = '';
  let running = true;
  const probe = (): Promise<number> =>
    new Promise((resolve) => {
      const started = performance.now();
      const req = http.get(`${base}/ping`, { agent: false }, (res) => {
        res.resume();
        res.on('end', () => resolve(performance.now() - started));
        res.on('error', () => resolve(Infinity));
      });
      req.setTimeout(stallMs * 5, () => req.destroy());
      req.on('error', () => resolve(Infinity));
    });
  const loop = (async () => {
    while (running) {
      const ms = await probe();
      if (!running && !Number.isFinite(ms)) break; // the server was stopped under the probe
      times.push(ms);
      if (ms > stallMs) stallsByPhase.push({ phase, ms: Math.round(ms) });
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    phase: (name) => (phase = name),
    stop: async () => {
      running = false;
      await loop;
      const sorted = times.filter(Number.isFinite).sort((a, b) => a - b);
      return {
        probes: times.length,
        stalls: stallsByPhase.length,
        stallsByPhase,
        p99Ms: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0,
        maxMs: times.length ? Math.max(...times) : 0,
      };
    },
  };
}
