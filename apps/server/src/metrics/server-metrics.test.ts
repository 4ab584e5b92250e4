import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { ServerMetrics } from './server-metrics.js';

describe('ServerMetrics', () => {
  it('reports the event loop lag at 1 ms resolution, not the 10 ms sampling interval', async () => {
    const metrics = new ServerMetrics();
    await metrics.registry.metrics(); // starts a sampling window
    await sleep(500);
    const text = await metrics.registry.metrics();
    const min = Number(/^kiln_nodejs_eventloop_lag_min_seconds (\S+)$/m.exec(text)?.[1]);
    expect(min).toBeGreaterThan(0);
    // Sampled every 10 ms, even the smallest delay of the window could never fall below 0.010 s;
    // the minimum, unlike a percentile, stays small on a busy machine.
    expect(min).toBeLessThan(0.009);
  });
});
