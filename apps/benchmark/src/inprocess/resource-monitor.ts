import os from 'node:os';

/** Memory and CPU this process (worker threads included) used while measured. */
export interface ResourceUsage {
  /** Largest resident set size sampled. */
  readonly rssPeakBytes: number;
  readonly rssEndBytes: number;
  /** CPU time over wall time: 100 = one core busy throughout. */
  readonly cpuPercent: number;
  /** Cores this process may use, to read cpuPercent against. */
  readonly cores: number;
}

const SAMPLE_MS = 100;

/** Samples RSS while running and measures the process's CPU time over the same span. */
export class ResourceMonitor {
  private readonly startedAt = performance.now();
  private readonly cpuAtStart = process.cpuUsage();
  private rssPeak = process.memoryUsage.rss();
  private readonly timer = setInterval(() => this.sample(), SAMPLE_MS);

  constructor() {
    this.timer.unref();
  }

  stop(): ResourceUsage {
    clearInterval(this.timer);
    this.sample();
    const cpu = process.cpuUsage(this.cpuAtStart);
    const wallUs = (performance.now() - this.startedAt) * 1000;
    return {
      rssPeakBytes: this.rssPeak,
      rssEndBytes: process.memoryUsage.rss(),
      cpuPercent: wallUs > 0 ? ((cpu.user + cpu.system) / wallUs) * 100 : 0,
      cores: os.availableParallelism(),
    };
  }

  private sample(): void {
    this.rssPeak = Math.max(this.rssPeak, process.memoryUsage.rss());
  }
}
