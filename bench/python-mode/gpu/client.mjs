// Device check: Python mode on a GPU through a real `kiln serve`, against the same handler on
// the CPU. Prints the answers, the management API's view, and alternating throughput rounds.
const [inference, management] = process.argv.slice(2);
const SECONDS = Number(process.env.SECONDS_PER_ROUND ?? 5);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);

function npy(data, shape) {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head.writeUInt16LE(header.length, 8);
  return Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(data.buffer)]);
}

let seed = 7;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
const body = npy(Float32Array.from({ length: 3 * 224 * 224 }, random), [3, 224, 224]);

async function predict(model) {
  const res = await fetch(`${inference}/predictions/${model}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-npy' },
    body,
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${model}: ${res.status} ${text}`);
  return JSON.parse(text);
}

const cpu = await predict('rcpu');
const gpu = await predict('rgpu');
const gpub = await predict('rgpub');
console.log('answer cpu ', JSON.stringify(cpu));
console.log('answer gpu ', JSON.stringify(gpu));
console.log('answer gpub', JSON.stringify(gpub));
const rel = Math.abs(cpu.logit0 - gpu.logit0) / Math.max(1e-6, Math.abs(cpu.logit0));
console.log(
  `same top-1: ${cpu.top5[0] === gpu.top5[0] && gpu.top5[0] === gpub.top5[0]}; logit0 relative difference cpu/gpu ${rel.toExponential(2)}`,
);
for (const model of ['rcpu', 'rgpu', 'rgpub']) {
  const res = await fetch(`${management}/models/${model}`);
  const described = await res.json();
  const version = Array.isArray(described) ? described[0] : described;
  const groups = (version.workerGroups ?? []).map((g) => ({
    device: g.device,
    workers: g.workers?.length,
    model: g.workers?.[0]?.model,
  }));
  console.log(
    `describe ${model}: batchSize ${version.batchSize}`,
    JSON.stringify(groups).slice(0, 500),
  );
}

async function round(model) {
  const end = performance.now() + SECONDS * 1000;
  let ok = 0;
  let failed = 0;
  const latencies = [];
  const batches = new Map();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < end) {
        const started = performance.now();
        try {
          const answer = await predict(model);
          batches.set(answer.batch, (batches.get(answer.batch) ?? 0) + 1);
          latencies.push(performance.now() - started);
          ok++;
        } catch (error) {
          failed++;
          if (failed < 3) console.log(String(error).slice(0, 300));
        }
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const p = (q) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    rps: ok / SECONDS,
    failed,
    p50: p(0.5),
    p99: p(0.99),
    batches: Object.fromEntries(batches),
  };
}

for (const model of ['rcpu', 'rgpu', 'rgpub']) await round(model); // warm-up
const results = { rcpu: [], rgpu: [], rgpub: [] };
for (let r = 0; r < 3; r++) {
  for (const model of Object.keys(results)) {
    const result = await round(model);
    results[model].push(result);
    console.log(
      `round ${r + 1} ${model}: ${result.rps.toFixed(1)} req/s, p50 ${result.p50.toFixed(1)} ms, p99 ${result.p99.toFixed(1)} ms, failed ${result.failed}, batches ${JSON.stringify(result.batches)}`,
    );
  }
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = (xs) =>
  `${med(xs).toFixed(1)} [${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}]`;
for (const model of Object.keys(results))
  console.log(`${model}: ${summary(results[model].map((x) => x.rps))} req/s`);
const ratio = (a, b) => results[a].map((x, i) => x.rps / results[b][i].rps);
console.log(
  `rgpu ÷ rcpu: ${summary(ratio('rgpu', 'rcpu'))}; rgpub ÷ rgpu: ${summary(ratio('rgpub', 'rgpu'))} (c${CONCURRENCY}, ${SECONDS} s rounds, alternating)`,
);
