import { describe, expect, it } from 'vitest';
import { formatProfile } from './format-profile.js';
import { bottlenecks, parseProfileTrace } from './ort-profile.js';

const node = (
  name: string,
  op: string,
  ts: number,
  dur: number,
  args: Record<string, unknown> = {},
) => ({
  cat: 'Node',
  name: `${name}_kernel_time`,
  ts,
  dur,
  ph: 'X',
  args: { op_name: op, provider: 'CPUExecutionProvider', ...args },
});
const run = (ts: number, dur: number) => ({ cat: 'Session', name: 'model_run', ts, dur });

// Two runs: the first (warm-up) from t=1000, the second from t=2000.
const trace = [
  { cat: 'Session', name: 'model_loading_uri', ts: 0, dur: 300 },
  { cat: 'Session', name: 'session_initialization', ts: 300, dur: 500 },
  run(1000, 900),
  node('conv1', 'Conv', 1010, 600, {
    mem_arena_held: '4096',
    thread_scheduling_stats: { sub_threads: { 17: {} } },
  }),
  { cat: 'Node', name: 'conv1_fence_before', ts: 1009, dur: 1, args: { op_name: 'Conv' } },
  node('relu', 'Relu', 1700, 100),
  run(2000, 500),
  node('conv1', 'Conv', 2010, 300, { mem_arena_held: '8192' }),
  node('conv2', 'Conv', 2310, 100),
  node('relu', 'Relu', 2410, 50),
  { not: 'an event' },
  null,
];

describe('parseProfileTrace', () => {
  it('sums kernel time per node and per operator, slowest first', () => {
    const profile = parseProfileTrace(trace);
    expect(profile.runs).toBe(2);
    expect(profile.meanRunMs).toBeCloseTo(0.7);
    expect(profile.sessionInitMs).toBeCloseTo(0.8);
    expect(profile.nodeMs).toBeCloseTo(1.15);
    expect(profile.nodes.map((r) => [r.name, r.opType, r.calls])).toEqual([
      ['conv1', 'Conv', 2],
      ['relu', 'Relu', 2],
      ['conv2', 'Conv', 1],
    ]);
    expect(profile.nodes[0]!.totalMs).toBeCloseTo(0.9);
    expect(profile.nodes[0]!.meanMs).toBeCloseTo(0.45);
    expect(profile.nodes.reduce((sum, r) => sum + r.share, 0)).toBeCloseTo(1);
    expect(profile.opTypes.map((r) => [r.opType, r.nodes, r.calls])).toEqual([
      ['Conv', 2, 3],
      ['Relu', 1, 2],
    ]);
    expect(profile.threadsUsed).toBe(2);
    expect(profile.arenaBytes).toBe(8192);
  });

  it('leaves warm-up runs out', () => {
    const profile = parseProfileTrace(trace, { skipRuns: 1 });
    expect(profile.runs).toBe(1);
    expect(profile.meanRunMs).toBeCloseTo(0.5);
    expect(profile.nodes.map((r) => [r.name, r.totalMs])).toEqual([
      ['conv1', 0.3],
      ['conv2', 0.1],
      ['relu', 0.05],
    ]);
    expect(profile.threadsUsed).toBe(1);
  });

  it('names the few nodes that take most of the time', () => {
    const profile = parseProfileTrace(trace);
    expect(bottlenecks(profile).map((r) => r.name)).toEqual(['conv1']);
    expect(bottlenecks(profile, 0.9).map((r) => r.name)).toEqual(['conv1', 'relu']);
  });

  it('refuses what is not a trace', () => {
    expect(() => parseProfileTrace({ traceEvents: [] })).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
  });

  it('formats a readable report', () => {
    const text = formatProfile(parseProfileTrace(trace), { limit: 2 });
    expect(text).toMatch(/^runs 2, mean run 0.700 ms/);
    expect(text).toContain('threads 2, memory arena 0.0 MiB');
    expect(text).toMatch(/conv1\s+Conv\s+0.900\s+2\s+0.450\s+78.3%/);
    expect(text).not.toMatch(/^conv2/m);
    expect(text).toContain('bottlenecks (half the time): conv1 (Conv, 78.3%)');
  });
});
