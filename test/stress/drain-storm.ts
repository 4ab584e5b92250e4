import http from 'node:http';
import { type PhaseTally, count, inLanes, newTally } from './phase-tally.js';
import type { ServerProcess } from './server-process.js';

export interface DrainReport extends PhaseTally {
  /** From SIGTERM until the server's process was gone, ms. */
  exitMs: number;
  /** Answers after SIGTERM: served (200) and refused (503). */
  servedDuringDrain: number;
  refusedDuringDrain: number;
  /** Connections reset or refused after SIGTERM (the listener is closed: honest). */
  connectionErrors: number;
}

interface Exchange {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  error?: string;
}

function exchange(base: string, agent: http.Agent, body: Buffer): Promise<Exchange> {
  return new Promise((resolve) => {
    const req = http.request(
      `${base}/predictions/addmul`,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'tensor/npz', accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
          }),
        );
        res.on('error', (e) => resolve({ status: 0, headers: {}, body: '', error: e.message }));
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) =>
      resolve({ status: 0, headers: {}, body: '', error: e.code ?? e.message }),
    );
    req.end(body);
  });
}

/**
 * Keep-alive clients send valid requests without pause; the server gets SIGTERM under them.
 * Every request sent before the signal must be served; after it, each answer is 200 or a
 * 503 with Retry-After, and says `Connection: close` (never a 404 for the model being
 * drained); the process must be gone by `shutdown_timeout` (plus `graceMs`) whatever the
 * clients do.
 */
export async function runDrainStorm(
  server: ServerProcess,
  options: {
    validBody: Buffer;
    clients: number;
    loadMs: number;
    shutdownTimeoutMs: number;
    graceMs: number;
  },
): Promise<DrainReport> {
  const report: DrainReport = {
    ...newTally(),
    exitMs: 0,
    servedDuringDrain: 0,
    refusedDuringDrain: 0,
    connectionErrors: 0,
  };
  let signalledAt = 0;
  const deadline = options.shutdownTimeoutMs + options.graceMs;
  const lanes = inLanes(options.clients, async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      while (server.alive()) {
        const sentAfterSignal = signalledAt > 0;
        if (sentAfterSignal && performance.now() - signalledAt > deadline + 1000) break;
        const answer = await exchange(server.inference, agent, options.validBody);
        report.requests++;
        const seen = {
          kind: sentAfterSignal ? 'request during drain' : 'request before SIGTERM',
          status: answer.status,
          request: 'POST /predictions/addmul',
          answer: answer.error ?? answer.body,
        };
        if (!sentAfterSignal) {
          if (answer.status !== 200) count(report, 'innocentFailures', seen);
          continue;
        }
        if (answer.status === 0) {
          report.connectionErrors++;
          // The listener is closed: wait a little rather than spin on refused connections.
          await new Promise((resolve) => setTimeout(resolve, 20));
          continue;
        }
        if (answer.status === 200) report.servedDuringDrain++;
        else if (answer.status === 503 && answer.headers['retry-after'] !== undefined)
          report.refusedDuringDrain++;
        else count(report, 'innocentFailures', seen);
        if (answer.headers.connection !== 'close')
          count(report, 'innocentFailures', {
            ...seen,
            kind: 'drain answer kept the connection alive',
          });
      }
    } finally {
      agent.destroy();
    }
  });
  await new Promise((resolve) => setTimeout(resolve, options.loadMs));
  signalledAt = performance.now();
  process.kill(server.pid, 'SIGTERM');
  while (server.alive() && performance.now() - signalledAt < deadline + 5000)
    await new Promise((resolve) => setTimeout(resolve, 10));
  report.exitMs = performance.now() - signalledAt;
  if (server.alive() || report.exitMs > deadline)
    count(report, 'hangs', {
      kind: 'drain past shutdown_timeout',
      status: 0,
      request: 'SIGTERM',
      answer: `still up after ${report.exitMs.toFixed(0)} ms`,
    });
  await lanes;
  return report;
}
