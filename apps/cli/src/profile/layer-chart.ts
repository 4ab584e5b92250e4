import { barChart } from '@kiln/benchmark';
import type { LayerProfile } from './layer-profile.js';

/** An SVG bar chart of the slowest layers: mean time per run, with each layer's operator. */
export function layerChart(result: LayerProfile, top: number): string {
  const { profile } = result;
  const rows = profile.nodes.slice(0, top);
  const runs = Math.max(1, profile.runs);
  return barChart({
    title: `Time per layer: ${result.model} (${result.engine} ${result.engineVersion}, inputs ${result.inputs}, ${profile.runs} runs)`,
    valueLabel: 'milliseconds per run',
    categories: rows.map((r) => r.name),
    notes: rows.map((r) => `${r.opType}, ${(r.share * 100).toFixed(1)}%`),
    series: [
      { name: 'ms per run', values: rows.map((r) => Number((r.totalMs / runs).toFixed(4))) },
    ],
    width: 900,
  });
}
