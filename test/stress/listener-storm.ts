import { encodeNpz } from '@kiln/core';
import { type DrainReport, runDrainStorm } from './drain-storm.js';
import { runGenerationStorm } from './generation-storm.js';
import { runGrpcStorm } from './grpc-storm.js';
import { type Target, goodList } from './hostile-cases.js';
import { type PhaseTally, type Problem } from './phase-tally.js';
import { type PingReport, startPingProbe } from './ping-probe.js';
import { runPythonStorm } from './python-storm.js';
import type { ServerProcess } from './server-process.js';
import { STORM_MAX_PROMPT_BYTES } from './storm-setup.js';
import { type StormReport, runStorm, stormPassed } from './storm.js';

export interface FullStormOptions {
  /** Hostile requests on the HTTP listeners (inference, management, metrics). */
  readonly httpRequests: number;
  readonly grpcRequests: number;
  readonly generationRequests: number;
  /** 0 when Python mode is not served. */
  readonly pythonRequests: number;
  readonly concurrency: number;
  readonly seed: number;
  readonly hangMs: number;
  /** A refusal due at once (a prompt past its limit) slower than this counts as a hang. */
  readonly refusalMs: number;
  readonly generativeModel: string;
  readonly shutdownTimeoutMs: number;
  readonly onProgress?: (phase: string, report: StormReport | PhaseTally) => void;
}

export interface FullStormReport {
  readonly http: StormReport;
  readonly grpc: PhaseTally;
  readonly generation: PhaseTally;
  readonly python: PhaseTally;
  readonly drain: DrainReport;
  readonly ping: PingReport;
  /** The server's own largest event-loop delay over the storm (its metric), ms. */
  readonly eventLoopMaxMs: number;
  /** Every listener's counts added up; each must be 0. */
  readonly summary: Record<Problem | 'pingStalls', number> & { requests: number };
}

const PROBLEMS: Problem[] = ['crashes', 'hangs', 'unexpected5xx', 'nonJson', 'innocentFailures'];

/**
 * The whole storm: hostile requests on every listener of one `kiln serve` process in turn —
 * HTTP, v2 gRPC, the generation routes, Python-mode handlers — while `/ping` is probed
 * throughout, and last a drain under keep-alive load (the server is gone afterwards).
 */
export async function runFullStorm(
  server: ServerProcess,
  target: Target,
  options: FullStormOptions,
): Promise<FullStormReport> {
  const alive = () => server.alive();
  // Read once, so that the largest delay reported at the end covers the storm, not start-up.
  await eventLoopMax(server.metrics);
  const probe = startPingProbe(server.inference);
  const common = {
    concurrency: options.concurrency,
    seed: options.seed,
    hangMs: options.hangMs,
    alive,
  };
  probe.phase('http');
  const http = await runStorm(server, target, {
    requests: options.httpRequests,
    concurrency: options.concurrency,
    seed: options.seed,
    checkEvery: 500,
    hangMs: options.hangMs,
    warmup: Math.min(1000, options.httpRequests),
    ...(options.onProgress
      ? { onProgress: (r: StormReport) => options.onProgress!('http', r) }
      : {}),
  });
  probe.phase('grpc');
  const grpc = server.grpc
    ? await runGrpcStorm(server.grpc, {
        ...common,
        requests: options.grpcRequests,
        checkEvery: 250,
      })
    : failedPhase('the server printed no gRPC address');
  options.onProgress?.('grpc', grpc);
  probe.phase('generation');
  const generation = await runGenerationStorm(server.inference, {
    ...common,
    model: options.generativeModel,
    maxRequestSize: target.maxRequestSize,
    maxPromptBytes: STORM_MAX_PROMPT_BYTES,
    requests: options.generationRequests,
    checkEvery: 100,
    refusalMs: options.refusalMs,
  });
  options.onProgress?.('generation', generation);
  probe.phase('python');
  const python = await runPythonStorm(server.inference, {
    ...common,
    requests: options.pythonRequests,
  });
  options.onProgress?.('python', python);
  const ping = await probe.stop();
  const eventLoopMaxMs = await eventLoopMax(server.metrics);
  const drain = await runDrainStorm(server, {
    validBody: Buffer.from(encodeNpz(goodList())),
    clients: options.concurrency,
    loadMs: 1000,
    shutdownTimeoutMs: options.shutdownTimeoutMs,
    graceMs: 2000,
  });
  options.onProgress?.('drain', drain);
  const phases: PhaseTally[] = [http, grpc, generation, python, drain];
  const summary = {
    requests: phases.reduce((sum, p) => sum + p.requests, 0),
    ...Object.fromEntries(
      PROBLEMS.map((problem) => [problem, phases.reduce((sum, p) => sum + p[problem], 0)]),
    ),
    pingStalls: ping.stalls,
  } as FullStormReport['summary'];
  return { http, grpc, generation, python, drain, ping, eventLoopMaxMs, summary };
}

/** The largest event-loop delay the server saw since its metrics were last read, ms. */
async function eventLoopMax(metricsBase: string): Promise<number> {
  const text = await (await fetch(`${metricsBase}/metrics`)).text();
  const seconds = /^\w*nodejs_eventloop_lag_max_seconds(?:\{[^}]*\})? (\S+)$/m.exec(text)?.[1];
  return seconds === undefined ? Number.NaN : Math.round(Number(seconds) * 1000);
}

function failedPhase(reason: string): PhaseTally {
  return {
    requests: 0,
    crashes: 1,
    hangs: 0,
    unexpected5xx: 0,
    nonJson: 0,
    innocentFailures: 0,
    samples: [{ problem: 'crashes', kind: 'setup', status: 0, request: '', answer: reason }],
  };
}

/** Whether every listener came through: all counts 0 and the HTTP storm's memory bound held. */
export function fullStormPassed(report: FullStormReport): boolean {
  return (
    stormPassed(report.http) &&
    PROBLEMS.every((problem) => report.summary[problem] === 0) &&
    report.summary.pingStalls === 0
  );
}
