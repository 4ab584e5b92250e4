// Same tokens as transformers.js: makes the two test models (a Llama-style decoder with a
// SentencePiece-style tokenizer, a GPT-2-style one with byte-level BPE), then checks that
// Kiln and transformers.js choose the same greedy tokens for 20 prompts and encode and decode
// a 1 MB text alike. Prints a table; exits 1 on any mismatch.
//
//   node -C @kiln/source --import tsx bench/llm/parity.ts [--vocab 32000] [--text-bytes 1000000]
//     [--new-tokens 16] [--keep DIR]
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  type GenerationRow,
  addEndToken,
  compareGeneration,
  compareTokenizer,
} from './parity-check.js';
import { PARITY_CHATS, PARITY_PROMPTS, parityText } from './parity-inputs.js';
import { makeParityModels } from './parity-models.js';

const { values } = parseArgs({
  options: {
    vocab: { type: 'string', default: '32000' },
    'text-bytes': { type: 'string', default: '1000000' },
    'new-tokens': { type: 'string', default: '16' },
    keep: { type: 'string' },
  },
});
const root = values.keep ?? (await mkdtemp(join(tmpdir(), 'kiln-llm-parity-')));
let mismatches = 0;
try {
  console.log(`making the test models in ${root} ...`);
  const models = await makeParityModels(root, { llamaVocab: Number(values.vocab) });
  const text = parityText(Number(values['text-bytes']));
  for (const model of models) {
    console.log(`\n${model.id}: ${model.description}`);
    const prompts = model.chat ? [...PARITY_PROMPTS, ...PARITY_CHATS] : PARITY_PROMPTS;
    const newTokens = Number(values['new-tokens']);
    const rows = await compareGeneration(root, model, prompts, newTokens);
    report(rows);
    // Again with a token the first prompt generates as a second end of sequence: both sides
    // must stop at it alike.
    const end = rows[0]!.transformers[Math.floor(newTokens / 3)];
    if (end !== undefined) {
      await addEndToken(model.dir, end);
      console.log(`with ${end} as a second end-of-sequence token (generation_config.json):`);
      report(await compareGeneration(root, model, prompts, newTokens));
    }
    const t = await compareTokenizer(root, model, text);
    console.table([
      {
        text: `${(t.bytes / 1e6).toFixed(2)} MB`,
        tokens: t.tokens,
        encode: t.encodeSame ? 'same' : `differs at ${t.firstDifference}`,
        decode: t.decodeSame ? 'same' : 'DIFFERS',
        't.js default clean-up': t.cleanUpSame ? 'same' : 'differs (not counted)',
        'round trip (kiln / t.js)': `${t.kilnRoundTrip} / ${t.transformersRoundTrip}`,
        'ms (kiln / t.js)': `${t.kilnMs.toFixed(0)} / ${t.transformersMs.toFixed(0)}`,
      },
    ]);
    if (!t.encodeSame || !t.decodeSame) mismatches++;
  }
} finally {
  if (!values.keep) await rm(root, { recursive: true, force: true });
}
console.log(mismatches === 0 ? '\nall the same' : `\n${mismatches} mismatches`);
process.exitCode = mismatches === 0 ? 0 : 1;

function report(rows: readonly GenerationRow[]): void {
  console.table(rows.map(tableRow));
  mismatches += rows.filter((r) => !r.same).length;
  for (const r of rows.filter((row) => !row.same))
    console.log(
      `MISMATCH ${JSON.stringify(r.prompt)}\n  prompt kiln ${r.kilnPrompt.join(' ')}\n  prompt t.js ${r.transformersPrompt.join(' ')}\n  new kiln ${r.kiln.join(' ')}\n  new t.js ${r.transformers.join(' ')}`,
    );
}

function tableRow(r: GenerationRow): Record<string, string | number> {
  const prompt =
    typeof r.prompt === 'string'
      ? JSON.stringify(r.prompt)
      : `chat: ${r.prompt.map((m) => m.role).join(', ')}`;
  return {
    prompt: prompt.length > 32 ? `${prompt.slice(0, 31)}…` : prompt,
    'prompt ids': r.kilnPrompt.length,
    new: r.kiln.length,
    eos: r.kilnEnded ? 'yes' : '',
    tokens: r.same ? 'same' : 'MISMATCH',
  };
}
