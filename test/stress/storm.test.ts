// The bounded storm CI runs: hostile requests on every listener of one `kiln serve` process
// (HTTP, v2 gRPC, generation routes, Python-mode handlers), /ping probed throughout, and a
// drain under keep-alive load at the end. The full one is `npm run stress`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Target } from './hostile-cases.js';
import { fullStormPassed, runFullStorm } from './listener-storm.js';
import type { ServerProcess } from './server-process.js';
import {
  STORM_GENERATIVE_MODEL,
  STORM_SHUTDOWN_TIMEOUT_MS,
  startStormServer,
} from './storm-setup.js';

let server: ServerProcess;
let target: Target;
let python: boolean;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ server, target, python, cleanup } = await startStormServer());
});

afterAll(async () => {
  await cleanup?.();
});

describe('hostile-input storm over every listener (bounded)', () => {
  it('loses nothing: no crash, hang, unexpected 5xx, non-JSON error, innocent failure or /ping stall', async () => {
    const report = await runFullStorm(server, target, {
      httpRequests: 3000,
      grpcRequests: 400,
      generationRequests: 200,
      pythonRequests: python ? 60 : 0,
      concurrency: 8,
      seed: 12,
      hangMs: 10_000,
      refusalMs: 1000,
      generativeModel: STORM_GENERATIVE_MODEL,
      shutdownTimeoutMs: STORM_SHUTDOWN_TIMEOUT_MS,
    });
    const samples = Object.fromEntries(
      (['http', 'grpc', 'generation', 'python', 'drain'] as const).map((p) => [
        p,
        report[p].samples,
      ]),
    );
    expect(samples).toEqual({ http: [], grpc: [], generation: [], python: [], drain: [] });
    expect(report.ping.stallsByPhase).toEqual([]);
    expect(report.summary).toMatchObject({
      crashes: 0,
      hangs: 0,
      unexpected5xx: 0,
      nonJson: 0,
      innocentFailures: 0,
      pingStalls: 0,
    });
    expect(report.http).toMatchObject({ requests: 3000, validChecks: 6 });
    expect(report.grpc.requests).toBe(400);
    expect(report.generation.requests).toBe(200);
    expect(report.python.requests).toBe(python ? 60 : 0);
    // The drain ran under load: requests were answered during it, and the server is gone.
    expect(report.drain.servedDuringDrain + report.drain.refusedDuringDrain).toBeGreaterThan(0);
    expect(server.alive()).toBe(false);
    expect(report.http.rssAfter - report.http.rssBefore).toBeLessThan(64 * 1024 * 1024);
    expect(fullStormPassed(report)).toBe(true);
  }, 420_000);
});
