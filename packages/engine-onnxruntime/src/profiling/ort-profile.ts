import { readFile, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { KilnError, KilnErrorCode } from '@kiln/core';

/** Time spent in one graph node (after ONNX Runtime's optimizations fused and renamed nodes). */
export interface OrtProfileRow {
  readonly name: string;
  readonly opType: string;
  /** Execution provider that ran it (CPUExecutionProvider…). */
  readonly provider: string | undefined;
  readonly totalMs: number;
  readonly calls: number;
  readonly meanMs: number;
  /** Fraction of all node time, 0–1. */
  readonly share: number;
}

export interface OrtOpTypeRow {
  readonly opType: string;
  readonly nodes: number;
  readonly totalMs: number;
  readonly calls: number;
  readonly share: number;
}

/** ONNX Runtime's trace of a session, as per-node and per-operator tables, slowest first. */
export interface OrtProfile {
  /** Model runs counted (warm-up runs excluded). */
  readonly runs: number;
  /** Mean wall time of a counted run, from ORT's own `model_run` events. */
  readonly meanRunMs: number;
  /** Sum of node kernel times over counted runs. */
  readonly nodeMs: number;
  /** Model loading plus session initialisation. */
  readonly sessionInitMs: number;
  /** Most threads that worked on one node (the intra-op pool in use); 1 without a pool. */
  readonly threadsUsed: number;
  /** Largest CPU memory arena held during a run; undefined when the arena is off. */
  readonly arenaBytes: number | undefined;
  readonly nodes: readonly OrtProfileRow[];
  readonly opTypes: readonly OrtOpTypeRow[];
}

interface TraceEvent {
  cat?: unknown;
  name?: unknown;
  dur?: unknown;
  ts?: unknown;
  args?: {
    op_name?: unknown;
    provider?: unknown;
    mem_arena_held?: unknown;
    thread_scheduling_stats?: { sub_threads?: unknown };
  };
}

const KERNEL_SUFFIX = '_kernel_time';

/**
 * Turns ORT's Chrome-trace events into tables. Node events are `cat: "Node"` with `dur` in
 * microseconds and `args.op_name`; `_kernel_time` events hold the compute (fence events
 * around them are bookkeeping). Nodes inside the first `skipRuns` `model_run` events are
 * left out, so warm-up allocations do not distort the table.
 */
export function parseProfileTrace(trace: unknown, options: { skipRuns?: number } = {}): OrtProfile {
  if (!Array.isArray(trace))
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      'an ONNX Runtime profile is a JSON array of trace events',
    );
  const events = trace.filter((e): e is TraceEvent => typeof e === 'object' && e !== null);
  const session = events.filter((e) => e.cat === 'Session');
  const runs = session
    .filter((e) => e.name === 'model_run')
    .map((e) => ({ start: num(e.ts), end: num(e.ts) + num(e.dur) }));
  runs.sort((a, b) => a.start - b.start);
  const skipped = runs.slice(0, options.skipRuns ?? 0);
  const counted = runs.slice(skipped.length);
  const inSkippedRun = (ts: number) => skipped.some((r) => ts >= r.start && ts <= r.end);

  const byNode = new Map<
    string,
    { opType: string; provider: string | undefined; us: number; calls: number }
  >();
  let threadsUsed = 1;
  let arenaBytes: number | undefined;
  for (const e of events) {
    if (
      e.cat !== 'Node' ||
      typeof e.name !== 'string' ||
      !e.name.endsWith(KERNEL_SUFFIX) ||
      inSkippedRun(num(e.ts))
    )
      continue;
    const subThreads = e.args?.thread_scheduling_stats?.sub_threads;
    if (typeof subThreads === 'object' && subThreads !== null) {
      threadsUsed = Math.max(threadsUsed, 1 + Object.keys(subThreads).length);
    }
    const arena = Number(e.args?.mem_arena_held);
    if (e.args?.mem_arena_held !== undefined && Number.isFinite(arena)) {
      arenaBytes = Math.max(arenaBytes ?? 0, arena);
    }
    const name = e.name.slice(0, -KERNEL_SUFFIX.length);
    const row = byNode.get(name) ?? {
      opType: typeof e.args?.op_name === 'string' ? e.args.op_name : 'unknown',
      provider: typeof e.args?.provider === 'string' ? e.args.provider : undefined,
      us: 0,
      calls: 0,
    };
    row.us += num(e.dur);
    row.calls += 1;
    byNode.set(name, row);
  }
  const totalUs = [...byNode.values()].reduce((sum, r) => sum + r.us, 0);
  const share = (us: number) => (totalUs === 0 ? 0 : us / totalUs);
  const nodes = [...byNode]
    .map(([name, r]) => ({
      name,
      opType: r.opType,
      provider: r.provider,
      totalMs: r.us / 1000,
      calls: r.calls,
      meanMs: r.us / 1000 / r.calls,
      share: share(r.us),
    }))
    .sort((a, b) => b.totalMs - a.totalMs);

  const byOp = new Map<string, { nodes: number; us: number; calls: number }>();
  for (const [, r] of byNode) {
    const op = byOp.get(r.opType) ?? { nodes: 0, us: 0, calls: 0 };
    op.nodes += 1;
    op.us += r.us;
    op.calls += r.calls;
    byOp.set(r.opType, op);
  }
  const opTypes = [...byOp]
    .map(([opType, r]) => ({
      opType,
      nodes: r.nodes,
      totalMs: r.us / 1000,
      calls: r.calls,
      share: share(r.us),
    }))
    .sort((a, b) => b.totalMs - a.totalMs);

  const initUs = session
    .filter(
      (e) =>
        e.name === 'model_loading_uri' ||
        e.name === 'model_loading_array' ||
        e.name === 'session_initialization',
    )
    .reduce((sum, e) => sum + num(e.dur), 0);
  const runUs = counted.reduce((sum, r) => sum + (r.end - r.start), 0);
  return {
    runs: counted.length,
    meanRunMs: counted.length === 0 ? 0 : runUs / counted.length / 1000,
    nodeMs: totalUs / 1000,
    sessionInitMs: initUs / 1000,
    threadsUsed,
    arenaBytes,
    nodes,
    opTypes,
  };
}

/** The nodes that together take `share` of the time (at least one), slowest first. */
export function bottlenecks(profile: OrtProfile, share = 0.5): OrtProfileRow[] {
  const out: OrtProfileRow[] = [];
  let covered = 0;
  for (const row of profile.nodes) {
    if (out.length > 0 && covered >= share) break;
    out.push(row);
    covered += row.share;
  }
  return out;
}

/** Reads (and deletes) the trace ONNX Runtime wrote into `dir`. */
export async function readProfileTrace(
  dir: string,
  options: { skipRuns?: number } = {},
): Promise<OrtProfile> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
  if (files.length === 0)
    throw new KilnError(KilnErrorCode.EngineError, `ONNX Runtime wrote no profile into ${dir}`);
  const file = join(dir, files.sort().at(-1)!);
  const text = await readFile(file, 'utf8');
  await rm(file, { force: true });
  let trace: unknown;
  try {
    trace = JSON.parse(text);
  } catch (error) {
    throw KilnError.wrap(
      error,
      KilnErrorCode.EngineError,
      'ONNX Runtime wrote an unreadable profile',
    );
  }
  return parseProfileTrace(trace, options);
}

function num(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}
