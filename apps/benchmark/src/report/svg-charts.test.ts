import { describe, expect, it } from 'vitest';
import { barChart, lineChart, niceTicks, wrapLabel } from './svg-charts.js';

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

describe('bar labels', () => {
  it('shows a long layer name whole, over several lines, its row as tall as its lines', () => {
    const long = '/features/features.12/expand3x3/Conv_output_0/the_rest_of_a_long_layer_name';
    const svg = barChart({
      title: 'Time per layer',
      valueLabel: 'ms',
      categories: [long, 'fc'],
      notes: ['Conv', 'Gemm'],
      series: [{ name: 'total', values: [4, 1] }],
    });
    expect(svg).not.toContain('…');
    const labels = [...svg.matchAll(/<text class="label"[^>]*>(.*?)<\/text>/g)].map((m) =>
      [...m[1]!.matchAll(/<tspan[^>]*>(.*?)<\/tspan>/g)].map((t) => t[1]!),
    );
    expect(labels[0]!.length).toBeGreaterThan(1);
    expect(labels[0]!.join('')).toBe(`${long} (Conv)`);
    expect(labels[1]).toEqual(['fc (Gemm)']);
    // The second row starts below every line of the first.
    const ys = [...svg.matchAll(/<tspan[^>]* y="([\d.]+)"/g)].map((m) => Number(m[1]));
    const bars = [...svg.matchAll(/<rect class="bar"[^>]* y="([\d.]+)"/g)].map((m) => Number(m[1]));
    expect(bars[1]!).toBeGreaterThan(ys[labels[0]!.length - 1]!);
  });

  it('breaks after separators, and mid-word only when a line has none', () => {
    expect(wrapLabel('short', 46)).toEqual(['short']);
    expect(wrapLabel('encoder/layer.11/attention/self/query/MatMul_output', 20)).toEqual([
      'encoder/layer.11/',
      'attention/self/',
      'query/MatMul_output',
    ]);
    expect(wrapLabel('x'.repeat(50), 20)).toEqual(['x'.repeat(20), 'x'.repeat(20), 'x'.repeat(10)]);
  });
});

describe('niceTicks', () => {
  it('covers the range with round steps', () => {
    expect(niceTicks(0, 47)).toEqual([0, 10, 20, 30, 40, 50]);
    expect(niceTicks(0, 0.9)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0, 0)).toEqual([0, 1]);
  });
});
