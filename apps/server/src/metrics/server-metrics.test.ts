import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ServerMetrics } from './server-metrics.js';

describe('ServerMetrics', () => {
  it('reports the event loop lag at 1 ms resolution, not the 10 ms sampling interval', async () => {
    const metrics = new ServerMetrics();
    await metrics.registry.metrics(); // starts a sampling window
    await sleep(500);
    const text = await metrics.registry.metrics();
    const p99 = Number(/^kiln_nodejs_eventloop_lag_p99_seconds (\S+)$/m.exec(text)?.[1]);
    expect(p99).toBeGreaterThan(0);
    // Sampled every 10 ms, the idle figure could never fall below 0.010 s.
    expect(p99).toBeLessThan(0.009);
  });
});
