// The text-generation server a Node user would write from transformers.js's docs: Koa, one
// `pipeline('text-generation', …)` loaded at start from the local folder, a TextStreamer whose
// callbacks write each new token to the response as it comes, one generation at a time (the
// pipeline generates one prompt per call). Plain JavaScript, run as its own process by
// vs-transformers-js.ts: `node transformers-js-server.mjs <model dir> <port> <intra-op threads>`.
//
// POST /generate {"prompt": "…", "max_new_tokens": n} answers JSON lines: {"token": id} per
// new token, {"text": "…"} as the streamer finishes words, then {"generated_text": "…"}.
import { basename, dirname } from 'node:path';
import { PassThrough } from 'node:stream';
import Koa from 'koa';
import { TextStreamer, env, pipeline } from '@huggingface/transformers';

const [modelDir, port, threads] = process.argv.slice(2);
env.allowRemoteModels = false;
env.localModelPath = dirname(modelDir);
const generator = await pipeline('text-generation', basename(modelDir), {
  dtype: 'fp32',
  session_options: { intraOpNumThreads: Number(threads) },
});
// The end token closes a generation; it is no token of the answer.
const ends = new Set([generator.model.generation_config.eos_token_id].flat().map(Number));

/** One generation at a time: each request's turn starts when the one before has finished. */
let queue = Promise.resolve();

const app = new Koa();
app.use(async (ctx) => {
  if (ctx.path === '/ping') {
    ctx.body = { status: 'Healthy' };
    return;
  }
  const chunks = [];
  for await (const chunk of ctx.req) chunks.push(chunk);
  const { prompt, max_new_tokens } = JSON.parse(Buffer.concat(chunks).toString());
  const stream = new PassThrough();
  const write = (value) => stream.write(`${JSON.stringify(value)}\n`);
  ctx.type = 'application/jsonlines';
  ctx.body = stream;
  queue = queue
    .then(async () => {
      const streamer = new TextStreamer(generator.tokenizer, {
        skip_prompt: true,
        callback_function: (text) => write({ text }),
        token_callback_function: (tokens) => {
          for (const token of tokens) if (!ends.has(Number(token))) write({ token: Number(token) });
        },
      });
      const [output] = await generator(prompt, {
        max_new_tokens,
        do_sample: false,
        return_full_text: false,
        streamer,
      });
      write({ generated_text: output.generated_text });
    })
    .catch((error) => write({ error: String(error) }))
    .finally(() => stream.end());
});
app.listen(Number(port), '127.0.0.1', () => process.send?.('ready'));
