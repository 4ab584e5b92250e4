import { type OrtProfile, bottlenecks } from './ort-profile.js';

/** A plain-text report: summary, the slowest nodes, time per operator type. */
export function formatProfile(profile: OrtProfile, options: { limit?: number } = {}): string {
  const limit = options.limit ?? 15;
  const ms = (v: number) => v.toFixed(3);
  const pct = (v: number) => `${(v * 100).toFixed(1)}%`;
  const lines = [
    `runs ${profile.runs}, mean run ${ms(profile.meanRunMs)} ms, node time ${ms(profile.nodeMs)} ms, session init ${ms(profile.sessionInitMs)} ms`,
    `threads ${profile.threadsUsed}, memory arena ${profile.arenaBytes === undefined ? 'off' : `${(profile.arenaBytes / 2 ** 20).toFixed(1)} MiB`}`,
    '',
    table(
      ['node', 'op', 'total ms', 'calls', 'mean ms', 'share'],
      profile.nodes
        .slice(0, limit)
        .map((r) => [r.name, r.opType, ms(r.totalMs), String(r.calls), ms(r.meanMs), pct(r.share)]),
    ),
    '',
    table(
      ['op', 'nodes', 'total ms', 'share'],
      profile.opTypes.map((r) => [r.opType, String(r.nodes), ms(r.totalMs), pct(r.share)]),
    ),
    '',
    `bottlenecks (half the time): ${bottlenecks(profile)
      .map((r) => `${r.name} (${r.opType}, ${pct(r.share)})`)
      .join(', ')}`,
  ];
  return lines.join('\n');
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}
