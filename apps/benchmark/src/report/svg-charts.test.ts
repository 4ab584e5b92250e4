import { describe, expect, it } from 'vitest';
import { barChart, lineChart, niceTicks } from './svg-charts.js';

const count = (svg: string, pattern: RegExp) => svg.match(pattern)?.length ?? 0;

describe('lineChart', () => {
  it('draws a marker per point carrying its values, and a line per series', () => {
    const svg = lineChart({
      title: 'Latency <ms>',
      xLabel: 'concurrency',
      yLabel: 'ms',
      logX: true,
      series: [
        {
          name: 'p50',
          points: [
            { x: 1, y: 2 },
            { x: 2, y: 3 },
            { x: 4, y: 5 },
          ],
        },
        {
          name: 'p99',
          points: [
            { x: 1, y: 7 },
            { x: 2, y: 9 },
            { x: 4, y: 20 },
          ],
        },
      ],
    });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(count(svg, /<circle class="point"/g)).toBe(6);
    expect(count(svg, /<polyline class="series"/g)).toBe(2);
    expect(svg).toContain('data-series="p99" data-x="4" data-y="20"');
    expect(svg).toContain('Latency &lt;ms&gt;');
    // Doubling x steps are evenly spaced on the log scale.
    const xs = [
      ...svg.matchAll(/data-series="p50" data-x="\d+" data-y="[\d.]+" cx="([\d.]+)"/g),
    ].map((m) => Number(m[1]));
    expect(xs[1]! - xs[0]!).toBeCloseTo(xs[2]! - xs[1]!, 0);
  });

  it('places larger values higher', () => {
    const svg = lineChart({
      title: 't',
      xLabel: 'x',
      yLabel: 'y',
      series: [
        {
          name: 's',
          points: [
            { x: 1, y: 1 },
            { x: 2, y: 10 },
          ],
        },
      ],
    });
    const cy = [...svg.matchAll(/cy="([\d.]+)"/g)].map((m) => Number(m[1]));
    expect(cy[1]).toBeLessThan(cy[0]!);
  });
});

describe('barChart', () => {
  it('draws one bar per category and series, longer for larger values', () => {
    const svg = barChart({
      title: 'Time per layer',
      valueLabel: 'ms',
      categories: ['conv1', 'fc'],
      notes: ['Conv', 'Gemm'],
      series: [{ name: 'total', values: [4, 1] }],
    });
    expect(count(svg, /<rect class="bar"/g)).toBe(2);
    const widths = [...svg.matchAll(/<rect class="bar"[^>]* width="([\d.]+)"/g)].map((m) =>
      Number(m[1]),
    );
    expect(widths[0]! / widths[1]!).toBeCloseTo(4, 1);
    expect(svg).toContain('conv1 (Conv)');
  });
});

describe('niceTicks', () => {
  it('covers the range with round steps', () => {
    expect(niceTicks(0, 47)).toEqual([0, 10, 20, 30, 40, 50]);
    expect(niceTicks(0, 0.9)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0, 0)).toEqual([0, 1]);
  });
});
