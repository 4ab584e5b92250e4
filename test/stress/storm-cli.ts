// The hostile-input storm over every listener: `npm run stress -- --requests 20000
// [--grpc-requests 2000] [--generation-requests 1000] [--python-requests 300]
// [--concurrency 16] [--seed 1] [--ingress-processes 2] [--json]`.
import { parseArgs } from 'node:util';
import { type FullStormReport, fullStormPassed, runFullStorm } from './listener-storm.js';
import type { PhaseTally } from './phase-tally.js';
import type { StormReport } from './storm.js';
import {
  STORM_GENERATIVE_MODEL,
  STORM_SHUTDOWN_TIMEOUT_MS,
  startStormServer,
} from './storm-setup.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '20000' },
    'grpc-requests': { type: 'string', default: '2000' },
    'generation-requests': { type: 'string', default: '1000' },
    'python-requests': { type: 'string', default: '300' },
    concurrency: { type: 'string', default: '16' },
    seed: { type: 'string', default: '1' },
    'ingress-processes': { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
  },
});

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const tallyLine = (t: PhaseTally) =>
  `requests ${t.requests}  crashes ${t.crashes}  hangs ${t.hangs}  unexpected 5xx ${t.unexpected5xx}  non-JSON ${t.nonJson}  innocent failures ${t.innocentFailures}`;
const httpLine = (r: StormReport) =>
  `${tallyLine(r)}  valid ${r.validChecks - r.validWrong}/${r.validChecks}  RSS peak ${mib(r.rssPeak)}  ${r.seconds.toFixed(0)} s`;

const { server, target, python, cleanup } = await startStormServer({
  ingressProcesses: Number(values['ingress-processes']),
});
try {
  const report: FullStormReport = await runFullStorm(server, target, {
    httpRequests: Number(values.requests),
    grpcRequests: Number(values['grpc-requests']),
    generationRequests: Number(values['generation-requests']),
    pythonRequests: python ? Number(values['python-requests']) : 0,
    concurrency: Number(values.concurrency),
    seed: Number(values.seed),
    hangMs: 10_000,
    refusalMs: 1000,
    generativeModel: STORM_GENERATIVE_MODEL,
    shutdownTimeoutMs: STORM_SHUTDOWN_TIMEOUT_MS,
    onProgress: (phase, r) =>
      process.stderr.write(
        `${phase.padEnd(10)} ${'validChecks' in r ? httpLine(r) : tallyLine(r)}${server.alive() ? `  RSS now ${mib(server.rss())}` : ''}\n`,
      ),
  });
  const passed = fullStormPassed(report);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    const { http, drain, ping, eventLoopMaxMs, summary } = report;
    const phases = ['http', 'grpc', 'generation', 'python', 'drain'] as const;
    process.stdout.write(
      [
        ...phases.map((p) => `${p.padEnd(10)} ${tallyLine(report[p])}`),
        `http       RSS before ${mib(http.rssBefore)}  after ${mib(http.rssAfter)}  growth ${mib(http.rssAfter - http.rssBefore)}  peak ${mib(http.rssPeak)}`,
        `http       statuses ${JSON.stringify(http.byStatus)}`,
        `http       slowest (408s aside) ${JSON.stringify(http.slowest)}`,
        `drain      exit ${drain.exitMs.toFixed(0)} ms after SIGTERM (shutdown_timeout ${STORM_SHUTDOWN_TIMEOUT_MS} ms)  served ${drain.servedDuringDrain}  refused 503 ${drain.refusedDuringDrain}  connection errors ${drain.connectionErrors}`,
        `/ping      ${ping.probes} probes  p99 ${ping.p99Ms.toFixed(1)} ms  max ${ping.maxMs.toFixed(1)} ms  stalls over 1 s ${ping.stalls}  (the server's event loop: max delay ${eventLoopMaxMs} ms)${ping.stalls ? ` ${JSON.stringify(ping.stallsByPhase)}` : ''}`,
        `summary    requests ${summary.requests}  crashes ${summary.crashes}  hangs ${summary.hangs}  unexpected 5xx ${summary.unexpected5xx}  non-JSON ${summary.nonJson}  innocent failures ${summary.innocentFailures}  /ping stalls ${summary.pingStalls}`,
        ...phases.flatMap((p) =>
          report[p].samples.map(
            (s) =>
              `  ${p} ${s.problem} [${s.kind}] ${s.status}: ${JSON.stringify(s.request.slice(0, 160))} -> ${JSON.stringify(s.answer.slice(0, 160))}`,
          ),
        ),
        passed ? 'PASS' : 'FAIL',
      ].join('\n') + '\n',
    );
  }
  process.exitCode = passed ? 0 : 1;
} finally {
  await cleanup();
}
