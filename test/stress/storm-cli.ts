// The hostile-input storm: `npm run stress -- --requests 20000 [--concurrency 16] [--seed 1]
// [--ingress-processes 2]`.
import { parseArgs } from 'node:util';
import { runStorm, stormPassed, type StormReport } from './storm.js';
import { startStormServer } from './storm-setup.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '16' },
    seed: { type: 'string', default: '1' },
    'ingress-processes': { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
  },
});

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const line = (r: StormReport) =>
  `requests ${r.requests}  crashes ${r.crashes}  hangs ${r.hangs}  unexpected 5xx ${r.unexpected5xx}  non-JSON ${r.nonJson}  valid ${r.validChecks - r.validWrong}/${r.validChecks}  RSS peak ${mib(r.rssPeak)}  ${r.seconds.toFixed(0)} s`;

const { server, target, cleanup } = await startStormServer({
  ingressProcesses: Number(values['ingress-processes']),
});
try {
  const report = await runStorm(server, target, {
    requests: Number(values.requests),
    concurrency: Number(values.concurrency),
    seed: Number(values.seed),
    checkEvery: 500,
    hangMs: 10_000,
    warmup: 1000,
    onProgress: (r) => process.stderr.write(`${line(r)}  RSS now ${mib(server.rss())}\n`),
  });
  if (values.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } else {
    process.stdout.write(
      [
        line(report),
        `RSS before ${mib(report.rssBefore)}  after ${mib(report.rssAfter)}  growth ${mib(report.rssAfter - report.rssBefore)}  peak ${mib(report.rssPeak)}`,
        `statuses ${JSON.stringify(report.byStatus)}`,
        ...report.samples.map(
          (s) =>
            `  ${s.problem} [${s.kind}] ${s.status}: ${JSON.stringify(s.request.slice(0, 160))} -> ${JSON.stringify(s.answer.slice(0, 160))}`,
        ),
        stormPassed(report) ? 'PASS' : 'FAIL',
      ].join('\n') + '\n',
    );
  }
  process.exitCode = stormPassed(report) ? 0 : 1;
} finally {
  await cleanup();
}
