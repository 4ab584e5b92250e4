// `kiln serve` with rolling batching against what a Node user writes with transformers.js: a
// Koa server around `pipeline('text-generation')`, one generation at a time. Both serve the same
// transformers.js folder with the same ONNX Runtime intra-op threads, stream their tokens, and
// get the same requests at the same arrival times, 16 and 1 at a time. See bench/README.md.
import { type ChildProcess, fork } from 'node:child_process';
import { copyFile, link, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { loadTextTokenizer } from '@kiln/core';
import {
  type Goal,
  type Spread,
  formatGoal,
  formatSpread,
  loadAverage,
  machineLine,
  meets,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';
import { orderOf } from '../harness/rounds.js';
import { buildKilnCli, startKilnServe, stopChild } from '../server/contenders.js';
import { LLM_MODEL_OPTIONS, llmModelFrom } from './llm-model.js';
import { LLM_WORKLOAD_OPTIONS, llmWorkload } from './llm-workload.js';
import {
  type StreamedAnswer,
  type StreamedRequest,
  type StreamedRunFigures,
  type StreamingServer,
  kilnLmiServer,
  runStreamed,
  transformersJsServer,
} from './streamed-requests.js';

const { values } = parseArgs({
  options: {
    ...LLM_WORKLOAD_OPTIONS,
    rounds: { type: 'string', default: '3' },
    /** Requests sent one at a time to both before the rounds, to check their tokens agree. */
    check: { type: 'string', default: '4' },
    /** Kiln listens on port…port + 2, transformers.js's server on port + 3. */
    port: { type: 'string', default: '18480' },
    /** Serve with the CLI as last built (apps/cli/dist) instead of building it first. */
    'no-build': { type: 'boolean', default: false },
    ...LLM_MODEL_OPTIONS,
  },
});
const rounds = Number(values.rounds);
const threads = values.threads;
const concurrencies = [Number(values.concurrency), 1];
const port = Number(values.port);
const KILN = 'kiln';
const TJS = 'transformers.js';

console.log(machineLine());
const model = await llmModelFrom(values, (line) => console.log(`  ${line}`));
const tokenizer = await loadTextTokenizer(model.dir);

// Prompts of words: tokens whose text is a word (or a space and a word), so that a prompt's
// text encodes to about its drawn length in either server.
const words: number[] = [];
for (let id = 0; id < tokenizer.vocabSize; id++)
  if (/^ ?[a-z]{2,}$/i.test(tokenizer.decode([id]))) words.push(id);
if (words.length === 0) throw new Error(`${model.dir}: no token of the vocabulary is a word`);
const workload = llmWorkload(values, tokenizer.vocabSize, (pick, length) =>
  Array.from({ length }, () => words[pick(words.length)]!),
);
const requests: StreamedRequest[] = workload.requests.map((job, i) => ({
  prompt: tokenizer.decode(job.promptTokens).trimStart(),
  maxNewTokens: job.maxNewTokens,
  arrivalMs: workload.arrivalsMs[i]!,
}));

console.log(`model: ${model.description}; ${model.dir}`);
console.log(
  `workload: ${requests.length} requests, Poisson arrivals (mean gap ${values['gap-ms']} ms), prompts ${values['prompt-min']}–${values['prompt-max']} word tokens, outputs ${values['output-min']}–${values['output-max']} (${requests.reduce((n, r) => n + r.maxNewTokens, 0)} tokens), greedy; at most ${concurrencies.join(' / ')} in flight`,
);
console.log(
  `servers: kiln serve (rolling batching, max ${concurrencies[0]} sequences) and a Koa server around transformers.js's pipeline (one generation at a time); ONNX Runtime CPU, intra-op threads ${threads} each`,
);

// Kiln serves a copy of the folder (hard links where the file system allows; Kiln refuses
// symbolic links out of a model folder) with serving.properties of the settings under test:
// the folder itself is left as it is.
const kilnDir = await mkdtemp(join(tmpdir(), 'kiln-bench-llm-serve-'));
await linkTree(model.dir, kilnDir, (name) => name !== 'serving.properties');
await writeFile(
  join(kilnDir, 'serving.properties'),
  [
    'engine=OnnxRuntime',
    'option.rolling_batch=auto',
    `option.max_rolling_batch_size=${concurrencies[0]}`,
    `option.intraOpNumThreads=${threads}`,
    '',
  ].join('\n'),
);

const removeKilnDir = () => rm(kilnDir, { recursive: true, force: true });
const kiln = await (async () => {
  if (!values['no-build']) buildKilnCli();
  return startKilnServe('llm', kilnDir, port);
})().catch(async (error: unknown) => {
  await removeKilnDir();
  throw error;
});
const tjs = await startTransformersJs(model.dir, port + 3).catch(async (error: unknown) => {
  await kiln.stop();
  await removeKilnDir();
  throw error;
});
const servers: Record<string, StreamingServer> = {
  [KILN]: kilnLmiServer(KILN, `${kiln.url}/predictions/llm`),
  [TJS]: transformersJsServer(TJS, tjs.url),
};
const names = [KILN, TJS];

try {
  await checkSameTokens(Number(values.check));
  await warmUp();
  const figures = await measure();
  summarise(figures);
} finally {
  console.log(machineLine());
  await Promise.all([kiln.stop(), tjs.stop()]);
  await removeKilnDir();
}

/**
 * The first requests, one at a time to each server: both must generate the same greedy tokens
 * (the transformers.js server's token ids read with Kiln's tokenizer against Kiln's text; a
 * token that ends inside a character shows as U+FFFD in one and is held back by the other).
 */
async function checkSameTokens(count: number): Promise<void> {
  const trim = (text: string) => text.replace(/\uFFFD+$/, '');
  const rows: string[] = [];
  let same = 0;
  for (const request of requests.slice(0, count)) {
    const k = await servers[KILN]!.generate(request.prompt, request.maxNewTokens);
    const t = await servers[TJS]!.generate(request.prompt, request.maxNewTokens);
    const agree = k.tokens === t.tokens && trim(k.text) === trim(tokenizer.decode(t.ids!));
    if (agree) same++;
    rows.push(
      `${k.tokens}${agree ? '' : `≠${t.tokens}`}/${request.maxNewTokens} tokens (prompt ${k.promptTokens})`,
    );
    if (!agree)
      console.log(
        `  differ: kiln ${JSON.stringify(k.text.slice(0, 80))} / transformers.js ${JSON.stringify(tokenizer.decode(t.ids!).slice(0, 80))}`,
      );
  }
  console.log(
    `check: same greedy tokens from both for the first ${count} requests: ${same === count ? 'yes' : `no (${same} of ${count})`} — ${rows.join(', ')}`,
  );
}

/** A few short requests at once through each server, so that batched steps have run before. */
async function warmUp(): Promise<void> {
  const few = requests
    .slice(0, concurrencies[0])
    .map((r) => ({ ...r, maxNewTokens: Math.min(r.maxNewTokens, 16), arrivalMs: 0 }));
  for (const name of names) await runStreamed(servers[name]!, few, concurrencies[0]!);
}

type Figures = Record<string, StreamedRunFigures[]>;

/** Per concurrency, each server's runs: within a round both run at one concurrency, in turn. */
async function measure(): Promise<Map<number, Figures>> {
  const byConcurrency = new Map<number, Figures>(
    concurrencies.map((c) => [c, Object.fromEntries(names.map((n) => [n, []]))]),
  );
  for (let round = 0; round < rounds; round++) {
    for (const concurrency of concurrencies) {
      for (const name of orderOf(names, round)) {
        const f = await runStreamed(servers[name]!, requests, concurrency);
        byConcurrency.get(concurrency)![name]!.push(f);
        console.log(
          `round ${round + 1} c${concurrency} ${name.padEnd(16)} ${f.tokensPerS.toFixed(1).padStart(7)} tokens/s  TTFT p50 ${f.ttftP50Ms.toFixed(0).padStart(6)} / p90 ${f.ttftP90Ms.toFixed(0).padStart(6)} ms  ${f.msPerToken.toFixed(2).padStart(6)} ms per token  ${f.tokens} tokens in ${(f.wallMs / 1000).toFixed(1)} s  load ${loadAverage()}`,
        );
      }
    }
  }
  return byConcurrency;
}

function summarise(byConcurrency: Map<number, Figures>): void {
  console.log('\nmedian [min–max] over rounds');
  for (const [concurrency, figures] of byConcurrency) {
    for (const name of names) {
      const of = (pick: (f: StreamedRunFigures) => number, digits: number) =>
        formatSpread(spreadOf(figures[name]!.map(pick)), digits);
      const tokensPerS = of((f) => f.tokensPerS, 1);
      const ttft = of((f) => f.ttftP50Ms, 0);
      const perToken = of((f) => f.msPerToken, 2);
      console.log(
        `c${concurrency} ${name.padEnd(16)} tokens/s ${tokensPerS}  TTFT p50 ${ttft} ms  per token ${perToken} ms  load ${loadAverage()}`,
      );
    }
  }
  const ratio = (concurrency: number, pick: (f: StreamedRunFigures) => number) => {
    const figures = byConcurrency.get(concurrency)!;
    return ratioSpread(figures[KILN]!.map(pick), figures[TJS]!.map(pick));
  };
  const high = concurrencies[0]!;
  const tokensPerS = ratio(high, (f) => f.tokensPerS);
  const ttft = ratio(high, (f) => f.ttftP50Ms);
  const perToken = ratio(1, (f) => f.msPerToken);
  const aloneTokensPerS = ratio(1, (f) => f.tokensPerS);
  console.log(`\nratios kiln ÷ transformers.js within each round (load ${loadAverage()})`);
  console.log(goalRatio('kiln ÷ transformers.js tokens/s', tokensPerS, { atLeast: 3 }));
  console.log(goalRatio(`c${high} TTFT p50 kiln ÷ transformers.js`, ttft, { atMost: 0.5 }));
  console.log(goalRatio('c1 per-token time kiln ÷ transformers.js', perToken, { atMost: 1.05 }));
  console.log(`c1 tokens/s kiln ÷ transformers.js: ${formatSpread(aloneTokensPerS, 2)}`);
  console.log(lengthLine(byConcurrency));
}

/** `label: 0.31 [0.28–0.35] (goal ≤ 0.5: meets)`; the verdict is taken on the median. */
function goalRatio(label: string, spread: Spread, goal: Goal): string {
  const verdict = meets(spread.median, goal) ? 'meets' : 'misses';
  return `${label}: ${formatSpread(spread, 2)} (goal ${formatGoal(goal)}: ${verdict})`;
}

/**
 * Whether both servers did the same work: each request's token count alike in every run, and
 * how many ended at the model's end token before their drawn length (in both alike, since
 * greedy choices agree; Kiln's routes have no way to ignore the end token).
 */
function lengthLine(byConcurrency: Map<number, Figures>): string {
  const runs = [...byConcurrency.values()].flatMap((f) => names.flatMap((n) => f[n]!));
  const counts = (answers: readonly StreamedAnswer[]) => answers.map((a) => a.tokens).join();
  const reference = counts(runs[0]!.answers);
  const alike = runs.every((run) => counts(run.answers) === reference);
  const ended = runs[0]!.answers.filter((a, i) => a.tokens < requests[i]!.maxNewTokens).length;
  return `every run generated the same number of tokens for each request: ${alike ? 'yes' : 'no'}; requests that ended at the end token before their drawn length: ${ended} of ${requests.length}`;
}

/** `from`'s files under `to`, hard-linked, or copied where a link cannot be made. */
async function linkTree(from: string, to: string, keep: (name: string) => boolean): Promise<void> {
  for (const entry of await readdir(from, { withFileTypes: true })) {
    if (!keep(entry.name)) continue;
    const [source, target] = [join(from, entry.name), join(to, entry.name)];
    if (entry.isDirectory()) {
      await mkdir(target);
      await linkTree(source, target, () => true);
    } else await link(source, target).catch(() => copyFile(source, target));
  }
}

/** transformers-js-server.mjs in a process of its own, up once it says so. */
async function startTransformersJs(
  dir: string,
  listen: number,
): Promise<{ url: string; stop(): Promise<void> }> {
  const script = fileURLToPath(new URL('./transformers-js-server.mjs', import.meta.url));
  const child: ChildProcess = fork(script, [dir, String(listen), threads], {
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) =>
      reject(new Error(`the transformers.js server exited with ${code}`)),
    );
  });
  return { url: `http://127.0.0.1:${listen}`, stop: () => stopChild(child) };
}
