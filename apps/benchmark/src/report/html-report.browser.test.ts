import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { type BrowserContext, chromium } from 'playwright-core';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { levelResult } from '../load/level-result.js';
import { measureConcurrency } from '../load/measure-level.js';
import type { HttpResult, InProcessResult } from '../results.js';
import { STAGES } from '../results.js';
import { LatencyHistogram } from '../stats/latency-histogram.js';
import { htmlReport } from './html-report.js';

const CHROMIUM = process.env.KILN_CHROMIUM ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available)
  console.warn(`[kiln] skipping the HTML report browser test: no chromium at ${CHROMIUM}`);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A sweep measured for real against a service that takes 2 ms per request. */
async function measuredSweep(): Promise<HttpResult> {
  const levels = [];
  for (const concurrency of [1, 2, 4]) {
    levels.push(
      levelResult(
        await measureConcurrency(() => sleep(2), concurrency, { windowMs: 100, maxWindows: 3 }),
        undefined,
      ),
    );
  }
  return {
    kind: 'http',
    server: 'http://127.0.0.1:8080',
    model: 'demo',
    protocol: 'predictions',
    mode: 'concurrency',
    inputs: '(1,4)f',
    windowMs: 100,
    levels,
  };
}

function inProcessFrom(sweep: HttpResult): InProcessResult {
  const stages = Object.fromEntries(
    STAGES.map((stage, i) => {
      const h = new LatencyHistogram();
      for (const level of sweep.levels) h.record(level.latency.p50Ms / (i + 1));
      return [stage, h.summary()];
    }),
  ) as InProcessResult['latency'];
  return {
    kind: 'in-process',
    model: 'demo',
    url: './demo',
    engine: 'OnnxRuntime',
    workers: 1,
    concurrency: 1,
    threads: undefined,
    batchSize: 1,
    maxBatchDelayMs: 0,
    inputs: '(1,4)f',
    loadMs: 10,
    firstInferenceMs: 1,
    iterations: 3,
    errors: 0,
    elapsedMs: 10,
    throughput: sweep.levels[0]!.throughput,
    latency: stages,
    resources: { rssPeakBytes: 1, rssEndBytes: 1, cpuPercent: 1, cores: 2 },
    firstError: undefined,
  };
}

describe.skipIf(!available)('the HTML report in headless Chromium', () => {
  let browser: BrowserContext;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-bench-html-'));
    // A persistent context over a fresh, empty profile folder is Chromium's --user-data-dir.
    browser = await chromium.launchPersistentContext(path.join(dir, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1280, height: 900 },
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function open(html: string) {
    const file = path.join(dir, `report-${Math.random().toString(36).slice(2)}.html`);
    await writeFile(file, html);
    const page = await browser.newPage();
    const requests: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
    return { page, requests, url: pathToFileURL(file).href };
  }

  it('draws throughput and latency against concurrency, one marker per measured value, offline', async () => {
    const result = await measuredSweep();
    const { page, requests, url } = await open(htmlReport(result));
    expect(requests).toEqual([url]);
    expect(await page.locator('svg.kiln-chart').count()).toBe(2);
    const points = await page.locator('circle.point').evaluateAll((nodes) =>
      nodes.map((n) => {
        const box = n.getBoundingClientRect();
        const chart = n.closest('svg')!.getBoundingClientRect();
        return {
          series: n.getAttribute('data-series'),
          x: Number(n.getAttribute('data-x')),
          y: Number(n.getAttribute('data-y')),
          visible:
            box.width > 0 &&
            box.height > 0 &&
            box.left >= chart.left &&
            box.right <= chart.right &&
            box.top >= chart.top &&
            box.bottom <= chart.bottom,
          top: box.top - chart.top,
        };
      }),
    );
    // One throughput and three latency series, a marker per level each.
    expect(points).toHaveLength(result.levels.length * 4);
    expect(points.every((p) => p.visible)).toBe(true);
    const throughput = points.filter((p) => p.series === 'throughput');
    expect(throughput.map((p) => p.x)).toEqual([1, 2, 4]);
    throughput.forEach((p, i) => expect(p.y).toBeCloseTo(result.levels[i]!.throughput, 1));
    // Higher throughput is drawn higher up.
    const byValue = [...throughput].sort((a, b) => a.y - b.y);
    expect(byValue[0]!.top).toBeGreaterThan(byValue.at(-1)!.top);

    const shot = PNG.sync.read(await page.locator('svg.kiln-chart').first().screenshot());
    expect(shot.width).toBeGreaterThanOrEqual(600);
    expect(shot.height).toBeGreaterThanOrEqual(300);
    let seriesPixels = 0;
    for (let i = 0; i < shot.data.length; i += 4) {
      // The first series colour, #2563eb.
      if (
        Math.abs(shot.data[i]! - 0x25) < 12 &&
        Math.abs(shot.data[i + 1]! - 0x63) < 12 &&
        Math.abs(shot.data[i + 2]! - 0xeb) < 12
      )
        seriesPixels++;
    }
    expect(seriesPixels).toBeGreaterThan(100);
    await page.close();
  });

  it('draws a bar per stage and percentile for an in-process run', async () => {
    const result = inProcessFrom(await measuredSweep());
    const { page, requests, url } = await open(htmlReport(result));
    expect(requests).toEqual([url]);
    const bars = await page.locator('rect.bar').evaluateAll((nodes) =>
      nodes.map((n) => ({
        value: Number(n.getAttribute('data-value')),
        width: n.getBoundingClientRect().width,
      })),
    );
    expect(bars).toHaveLength(STAGES.length * 3);
    const widest = bars.reduce((a, b) => (b.value > a.value ? b : a));
    expect(widest.width).toBeGreaterThan(100);
    expect(await page.locator('#kiln-bench-result').textContent()).toContain('"kind":"in-process"');
    await page.close();
  });
});
