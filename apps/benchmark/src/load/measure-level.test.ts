import { describe, expect, it } from 'vitest';
import { measureConcurrency, measureRate } from './measure-level.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const windows = { windowMs: 150, maxWindows: 3 };

describe('measureConcurrency', () => {
  it('scales with clients when the service does not queue', async () => {
    const one = await measureConcurrency(() => sleep(10), 1, windows);
    const four = await measureConcurrency(() => sleep(10), 4, windows);
    expect(one.requests).toBeGreaterThan(0);
    expect(four.throughput / one.throughput).toBeGreaterThan(2.5);
    // A request cannot answer before its 10 ms sleep ends.
    expect(four.latency.p50Ms).toBeGreaterThanOrEqual(9.5);
    expect(four.windows).toBeGreaterThanOrEqual(3);
    expect(four.samples).toHaveLength(four.windows);
  });

  it('never keeps more requests in flight than its clients', async () => {
    let inFlight = 0;
    let most = 0;
    await measureConcurrency(
      async () => {
        most = Math.max(most, ++inFlight);
        await sleep(2);
        inFlight--;
      },
      3,
      windows,
    );
    expect(most).toBe(3);
    expect(inFlight).toBe(0);
  });

  it('fails a level where every request fails, with the first reason', async () => {
    await expect(
      measureConcurrency(
        () => Promise.reject(new Error('HTTP 404: model nope not found')),
        2,
        windows,
      ),
    ).rejects.toThrow(/every request failed at level 2: HTTP 404: model nope not found/);
  });

  it('counts failures among successes', async () => {
    let n = 0;
    const measured = await measureConcurrency(
      async () => {
        await sleep(2);
        if (++n % 4 === 0) throw new Error('every fourth fails');
      },
      2,
      windows,
    );
    expect(measured.errors).toBeGreaterThan(0);
    expect(measured.requests).toBeGreaterThan(measured.errors);
    expect(measured.firstError).toBe('every fourth fails');
  });
});

describe('measureRate', () => {
  it('sends on schedule whatever the answers take', async () => {
    const slow = await measureRate(() => sleep(30), 100, { ...windows, maxOutstanding: 100 });
    const double = await measureRate(() => sleep(30), 200, { ...windows, maxOutstanding: 100 });
    // Open loop: 30 ms answers do not hold the rate down to 1/30 ms per client.
    const ratio = double.throughput / slow.throughput;
    expect(ratio).toBeGreaterThan(1.5);
    expect(ratio).toBeLessThan(2.6);
    expect(slow.latency.p50Ms).toBeGreaterThanOrEqual(29);
  });

  it('fails requests beyond the outstanding limit instead of piling them up', async () => {
    const measured = await measureRate(() => sleep(100), 200, { ...windows, maxOutstanding: 4 });
    expect(measured.errors).toBeGreaterThan(0);
    expect(measured.firstError).toMatch(/more than 4 requests outstanding/);
  });
});
