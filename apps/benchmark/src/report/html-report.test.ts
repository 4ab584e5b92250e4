import { describe, expect, it } from 'vitest';
import type { StageEstimate } from '../http/server-split.js';
import type { HttpResult } from '../results.js';
import { LatencyHistogram } from '../stats/latency-histogram.js';
import { formatMs } from './format.js';
import { htmlReport } from './html-report.js';
import { textReport } from './text-report.js';

const stage = (meanMs: number): StageEstimate => ({
  meanMs,
  p50Ms: meanMs,
  p90Ms: meanMs,
  p99Ms: meanMs,
});

/** A two-level sweep whose server reported its split of the time. */
function sweepWithServerSplit(): HttpResult {
  const latency = new LatencyHistogram();
  for (const ms of [2, 3, 4]) latency.record(ms);
  return {
    kind: 'http',
    server: 'http://127.0.0.1:8080',
    model: 'resnet',
    protocol: 'predictions',
    mode: 'concurrency',
    inputs: 'cat.jpg',
    windowMs: 1000,
    levels: [1, 2].map((level) => ({
      level,
      throughput: 100 * level,
      requests: 300,
      errors: 0,
      latency: latency.summary(),
      stable: true,
      windows: 3,
      server: {
        jobs: 300,
        batches: 150,
        meanBatchSize: 2,
        queue: stage(0.25),
        preprocess: stage(1.5 * level),
        inference: stage(4),
        postprocess: stage(0.75 * level),
      },
      firstError: undefined,
    })),
  };
}

/** The cells of the report's first table, row by row. */
function firstTable(html: string): string[][] {
  const table = /<table>(.*?)<\/table>/s.exec(html)![1]!;
  return [...table.matchAll(/<tr>(.*?)<\/tr>/gs)].map((row) =>
    [...row[1]!.matchAll(/<t[hd]>(.*?)<\/t[hd]>/gs)].map((cell) => cell[1]!),
  );
}

describe('htmlReport of an HTTP sweep', () => {
  it("shows the server's pre- and post-processing next to queue and inference, as the text report does", () => {
    const result = sweepWithServerSplit();
    const [header, ...rows] = firstTable(htmlReport(result));
    const column = (name: string) => header!.indexOf(name);
    for (const name of ['server queue ms', 'server pre ms', 'server infer ms', 'server post ms'])
      expect(column(name)).toBeGreaterThan(0);
    expect(rows.map((row) => row[column('server pre ms')])).toEqual([formatMs(1.5), formatMs(3)]);
    expect(rows.map((row) => row[column('server post ms')])).toEqual([
      formatMs(0.75),
      formatMs(1.5),
    ]);
    // The text report lists the same stages.
    expect(textReport(result)).toMatch(/queue ms\s+pre ms\s+infer ms\s+post ms/);
  });

  it('leaves the server columns out when no metrics were read', () => {
    const result = sweepWithServerSplit();
    const bare = { ...result, levels: result.levels.map((l) => ({ ...l, server: undefined })) };
    const [header] = firstTable(htmlReport(bare));
    expect(header!.some((name) => name.startsWith('server'))).toBe(false);
  });
});
