// What response_format costs a token at a 32k vocabulary: XGrammar's mask for the next token,
// the sampler's pass that applies it, and advancing the grammar past the chosen token, against
// the same sampler choosing from the same logits unconstrained. All of it runs on the step
// worker's thread, beside the model, never on the event loop. See bench/README.md (llm).
import { parseArgs } from 'node:util';
import { BpeTokenizer, ResponseGrammars, TokenSampler, type TextTokenizer } from '@kiln/core';
import { sentencePieceTokenizerJson } from '@kiln/model-tools';
import {
  formatSpread,
  loadAverage,
  machineLine,
  ratioSpread,
  spreadOf,
} from '../harness/figures.js';

const { values } = parseArgs({
  options: {
    vocab: { type: 'string', default: '32000' },
    tokens: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
  },
});
const vocabSize = Number(values.vocab);
const tokenizer: TextTokenizer = BpeTokenizer.fromJson(sentencePieceTokenizerJson(vocabSize), {
  eos_token: '</s>',
});

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    age: { type: 'integer' },
    email: { type: 'string' },
    tags: { type: 'array', items: { type: 'string' } },
    address: {
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
      required: ['street', 'city'],
    },
  },
  required: ['name', 'age', 'email', 'tags', 'address'],
};
/** What the model "writes": valid JSON, so the walk stays on the grammar's common path. */
const script = tokenizer.encode(
  JSON.stringify({
    name: 'And God said, Let there be light',
    age: 930,
    email: 'adam@eden.example',
    tags: ['beginning', 'heaven', 'earth', 'waters', 'firmament'],
    address: { street: 'the garden eastward', city: 'Eden' },
  }),
  { addSpecialTokens: false },
);
const ends = tokenizer.eosTokenIds ?? [tokenizer.eosTokenId!];
const grammars = new ResponseGrammars(tokenizer.grammarVocabulary!(), tokenizer.vocabSize, ends);
const format = { type: 'json_schema', schema: JSON.stringify(schema) } as const;

/** Logits like a model's: noise, with the script's next token on top. */
function logitsFor(token: number | undefined, seed: number): Float32Array {
  const logits = new Float32Array(tokenizer.vocabSize);
  let state = seed;
  for (let i = 0; i < logits.length; i++) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    logits[i] = (state / 2 ** 31) * 4;
  }
  if (token !== undefined) logits[token] = 12;
  return logits;
}

/** µs in XGrammar alone (the mask and advancing past the token), per constrained token. */
const grammarUs: number[] = [];

/** µs per token over `count` tokens, constrained or not, restarting the walk as it ends. */
async function perToken(constrained: boolean, count: number): Promise<number> {
  let grammar = 0;
  const sampler = new TokenSampler({ doSample: true, temperature: 0.7, topP: 0.95, seed: 1 });
  const logits = Array.from({ length: 64 }, (_, i) => logitsFor(script[i % script.length], i));
  let constraint = constrained ? await grammars.constraint(format) : undefined;
  let at = 0;
  let spent = 0;
  for (let n = 0; n < count; n++) {
    const row = logits[at % logits.length]!;
    row[script[at % script.length]!] = 12;
    const started = performance.now();
    const allowed = constraint && (await constraint.allowed());
    const masked = performance.now();
    const token = sampler.next(row, [], allowed);
    const sampled = performance.now();
    if (allowed) constraint!.accept(token);
    const ended = performance.now();
    spent += ended - started;
    grammar += masked - started + (ended - sampled);
    row[script[at % script.length]!] = 0;
    at++;
    if (constraint && (!allowed || ends.includes(token) || at > script.length + 64)) {
      constraint.dispose();
      constraint = await grammars.constraint(format);
      at = 0;
    }
  }
  constraint?.dispose();
  if (constrained) grammarUs.push((grammar / count) * 1000);
  return (spent / count) * 1000;
}

console.log(machineLine());
console.log(
  `vocabulary ${tokenizer.vocabSize} (SentencePiece-style BPE with byte fallback), schema of 5 fields with a nested object and an array; ${values.tokens} tokens a round, sampling (temperature 0.7, top-p 0.95)`,
);
const first = performance.now();
await grammars.constraint(format).then((c) => c.dispose());
console.log(
  `first compile of the schema for this vocabulary: ${(performance.now() - first).toFixed(0)} ms (load ${loadAverage()})`,
);
const again = performance.now();
await grammars.constraint(format).then((c) => c.dispose());
console.log(
  `the same schema again (compiled once per step worker): ${(performance.now() - again).toFixed(1)} ms`,
);
const constrained: number[] = [];
const plain: number[] = [];
for (let round = 0; round < Number(values.rounds); round++) {
  const order = round % 2 === 0 ? [true, false] : [false, true];
  for (const c of order) (c ? constrained : plain).push(await perToken(c, Number(values.tokens)));
}
console.log(
  `unconstrained sampling: ${formatSpread(spreadOf(plain))} µs a token (load ${loadAverage()})`,
);
console.log(
  `with response_format:   ${formatSpread(spreadOf(constrained))} µs a token (load ${loadAverage()})`,
);
console.log(
  `XGrammar alone (the next token's mask, and advancing past the token chosen): ${formatSpread(spreadOf(grammarUs))} µs a token`,
);
console.log(
  `constrained ÷ unconstrained, sampler included (the mask also removes the tail top-p walks): ${formatSpread(ratioSpread(constrained, plain), 2)}×`,
);
