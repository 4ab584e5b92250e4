import { setTimeout as sleep } from 'node:timers/promises';
import { AggregatorRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ServerMetrics } from './server-metrics.js';

const figure = (text: string, name: string) =>
  Number(new RegExp(`^kiln_nodejs_eventloop_lag_${name}_seconds (\\S+)$`, 'm').exec(text)?.[1]);

describe('ServerMetrics', () => {
  it('sums over ingress processes where a sum means something, and says how many answered', async () => {
    const processes = [new ServerMetrics(), new ServerMetrics()];
    try {
      const [a, b] = processes as [ServerMetrics, ServerMetrics];
      a.modelStatus.set({ model: 'm' }, 1);
      b.modelStatus.set({ model: 'm' }, 0); // still loading there
      a.modelLoadSeconds.set({ model: 'm' }, 0.4);
      b.modelLoadSeconds.set({ model: 'm' }, 0.9);
      a.requests.inc({ api: 'inference', route: '/r', model: 'm', status: '200' }, 3);
      b.requests.inc({ api: 'inference', route: '/r', model: 'm', status: '200' }, 4);
      const text = await AggregatorRegistry.aggregate(
        await Promise.all(processes.map((m) => m.registry.getMetricsAsJSON())),
      ).metrics();
      expect(text).toMatch(/^kiln_ingress_processes 2$/m);
      expect(text).toMatch(/^kiln_model_ready\{model="m"\} 0$/m);
      expect(text).toMatch(/^kiln_model_load_seconds\{model="m"\} 0\.9$/m);
      expect(text).toMatch(/^kiln_requests_total\{[^}]*\} 7$/m);
      // Loop delays: the worse process's, not the sum of two loops' delays.
      const json = await a.registry.getMetricsAsJSON();
      for (const name of ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'])
        expect(
          json.find((m) => m.name === `kiln_nodejs_eventloop_lag_${name}_seconds`)?.aggregator,
        ).toBe('max');
    } finally {
      for (const m of processes) m.close();
    }
  });

  it('reports the event loop delay without the 10 ms sampling interval', async () => {
    const metrics = new ServerMetrics();
    try {
      await metrics.registry.metrics(); // starts a sampling window
      await sleep(500);
      const text = await metrics.registry.metrics();
      for (const name of ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99']) {
        expect(
          text.match(new RegExp(`^kiln_nodejs_eventloop_lag_${name}_seconds `, 'gm')),
        ).toHaveLength(1);
      }
      // Sampled every 10 ms, each raw sample is at least 0.010 s; the minimum, unlike a
      // percentile, stays small on a busy machine.
      expect(figure(text, 'min')).toBeGreaterThanOrEqual(0);
      expect(figure(text, 'min')).toBeLessThan(0.005);
      expect(figure(text, 'max')).toBeGreaterThanOrEqual(figure(text, 'p99'));
    } finally {
      metrics.close();
    }
  });

  it('sees a blocked loop in the window that held it, and starts a new window at each scrape', async () => {
    const metrics = new ServerMetrics();
    try {
      await metrics.registry.metrics();
      await sleep(50);
      const blockedUntil = performance.now() + 150;
      while (performance.now() < blockedUntil); // holds the loop for 150 ms
      await sleep(50);
      const blocked = await metrics.registry.metrics();
      expect(figure(blocked, 'max')).toBeGreaterThan(0.12);
      await sleep(300);
      const calm = await metrics.registry.metrics();
      expect(figure(calm, 'max')).toBeLessThan(figure(blocked, 'max'));
    } finally {
      metrics.close();
    }
  });
});
