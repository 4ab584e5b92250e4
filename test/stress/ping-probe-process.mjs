// The /ping probe of the storm, in a process of its own: the storm's client builds hostile
// bodies (npz bombs among them) on its own event loop, which must not count as the server's
// stall. Started by ping-probe.ts with the server's base URL; asks `GET /ping` on a fresh
// connection every INTERVAL_MS, one at a time. Messages in: {phase} and {stop}; out: the report.
import http from 'node:http';

const [base, intervalArg, stallArg] = process.argv.slice(2);
const intervalMs = Number(intervalArg);
const stallMs = Number(stallArg);
const times = [];
const stallsByPhase = [];
let phase = '';
let running = true;

process.on('message', (message) => {
  if (message.phase !== undefined) phase = message.phase;
  if (message.stop) running = false;
});

function probe() {
  return new Promise((resolve) => {
    const started = performance.now();
    const req = http.get(`${base}/ping`, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(performance.now() - started));
      res.on('error', () => resolve(Infinity));
    });
    req.setTimeout(stallMs * 5, () => req.destroy());
    req.on('error', () => resolve(Infinity));
  });
}

while (running) {
  const ms = await probe();
  if (!running && !Number.isFinite(ms)) break; // the server was stopped under the probe
  times.push(ms);
  if (ms > stallMs) stallsByPhase.push({ phase, ms: Math.round(ms) });
  await new Promise((resolve) => setTimeout(resolve, intervalMs));
}
const sorted = times.filter(Number.isFinite).sort((a, b) => a - b);
process.send(
  {
    probes: times.length,
    stalls: stallsByPhase.length,
    stallsByPhase,
    p99Ms: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0,
    maxMs: times.length ? Math.max(...times.map((t) => (Number.isFinite(t) ? t : stallMs * 5))) : 0,
  },
  () => process.exit(0),
);
