import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import {
  type ChatMessage,
  type GenerationParameters,
  KilnError,
  KilnErrorCode,
  type ResponseFormat,
} from '@kiln/core';
import type { GenerationChunk, GenerationJob, GenerationOutput, TopLogprob } from '@kiln/batching';
import type { GenerationPool } from '@kiln/worker-pool';
import { type BodyLimits, readBody } from '../http/read-body.js';
import { type ServerContext, bodyLimits } from '../routes/server-context.js';

/** A text-generation model a request named, ready to take it. */
export interface GenerativeModel {
  readonly name: string;
  readonly pool: GenerationPool;
}

/** The generative model a generation route names; anything else is a client error. */
export function requireGenerativeModel(
  server: ServerContext,
  name: string,
  version: string | undefined,
): GenerativeModel {
  if (!server.accepting) throw new KilnError(KilnErrorCode.Closed, 'server is shutting down');
  return { name, pool: server.models.generationPool(name, version) };
}

/** Room in a generation body for everything but its prompt (parameters, chat roles, JSON). */
const BODY_BYTES_BESIDE_PROMPT = 64 * 1024;
/** The most bytes JSON may write one byte of text with: a control character as `\u0001`. */
const JSON_BYTES_PER_TEXT_BYTE = 6;

/**
 * The body limit of a generation request: what a prompt of max_prompt_bytes takes as JSON at
 * worst, and never more than max_request_size. A larger body is refused before it is read
 * (Content-Length) or as soon as it passes the limit (chunked), never parsed.
 */
function generationBodyLimits(server: ServerContext): BodyLimits {
  const limits = bodyLimits(server);
  const forPrompt =
    JSON_BYTES_PER_TEXT_BYTE * server.config.maxPromptBytes + BODY_BYTES_BESIDE_PROMPT;
  if (forPrompt >= limits.maxBytes) return limits;
  return {
    ...limits,
    maxBytes: forPrompt,
    maxBytesName: 'the generation body limit from max_prompt_bytes',
  };
}

/** The request body of a generation request as a JSON object; anything else is INVALID_INPUT. */
export async function readJsonObject(
  ctx: Context,
  server: ServerContext,
): Promise<Record<string, unknown>> {
  const body = await readBody(ctx.req, generationBodyLimits(server));
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new KilnError(KilnErrorCode.InvalidInput, 'the request body is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new KilnError(KilnErrorCode.InvalidInput, 'the request body must be a JSON object');
  return value as Record<string, unknown>;
}

/** What a generation continues: a text, or a chat the model's template writes out. */
export type GenerationPrompt =
  string | { readonly messages: readonly ChatMessage[]; readonly tools?: readonly unknown[] };

/** How many choices a request asks for, and what each token reports besides its text. */
export interface ChoiceOptions {
  /** Independent sequences for the one prompt, each a job of its own (1 by default). */
  readonly n?: number;
  readonly logprobs?: boolean;
  /** How many of each step's most likely tokens to list (with `logprobs`). */
  readonly topLogprobs?: number;
  /** The shape each choice's text must take (OpenAI's `response_format`). */
  readonly responseFormat?: ResponseFormat;
}

/** A generated token's own text, log-probability and the step's most likely tokens. */
export interface TokenLogprobs {
  readonly token: number;
  readonly text: string;
  readonly logprob: number;
  readonly top: readonly TopLogprob[];
}

/** One choice's generation, with its tokens' log-probabilities when the request asked. */
export interface ChoiceOutput extends GenerationOutput {
  readonly index: number;
  readonly logprobs?: readonly TokenLogprobs[];
}

export interface TextPiece {
  readonly text: string;
  readonly token: number;
  /** The choice it belongs to (0 unless the request asked for several). */
  readonly index: number;
  /** Its token's, when the request asked (a piece may then have no text yet). */
  readonly logprobs?: TokenLogprobs;
}

export interface StreamFormat {
  readonly contentType: string;
  piece(piece: TextPiece): string;
  end(result: GenerationOutput): string;
  error(error: KilnError): string;
}

/** A stream of several choices: the end comes once every one has ended. */
export interface ChoicesStreamFormat extends Omit<StreamFormat, 'end'> {
  /** What follows a choice's last piece as soon as that choice ends, when anything does. */
  choiceEnd?(result: ChoiceOutput): string;
  end(results: readonly ChoiceOutput[]): string;
}

/** What a stream writes, in order: pieces, and the end of each choice. */
type StreamEvent = { readonly piece: TextPiece } | { readonly ended: ChoiceOutput };

/**
 * Refuses a prompt longer than max_prompt_bytes before any work on it: tokenizing takes time
 * in proportion (seconds for a megabyte of byte-level BPE), and what the model cannot hold is
 * known only after it.
 */
function checkPromptSize(prompt: GenerationPrompt, maxPromptBytes: number): void {
  // A chat counts as its messages' and tools' JSON: what its template writes grows with it.
  const text = typeof prompt === 'string' ? prompt : JSON.stringify(prompt);
  // Each UTF-16 unit is at least one UTF-8 byte: most long prompts are refused without a scan.
  if (text.length > maxPromptBytes || Buffer.byteLength(text) > maxPromptBytes)
    throw new KilnError(
      KilnErrorCode.PayloadTooLarge,
      `the prompt is longer than max_prompt_bytes (${maxPromptBytes} bytes)`,
    );
}

/**
 * Runs one generation for an HTTP request as a job of the model's pool: the prompt is
 * tokenized on the pool's prompt thread, the job waits in the pool's queue like any other,
 * and its tokens come back as chunks. A client that goes away cancels it, so its slot is free
 * at the next step. Without `stream` it answers the result; with one, nothing is sent until
 * the first text or the end (so refusals still get their status), then each piece as it
 * comes — a client that reads slowly holds its own job's next step, no one else's — then
 * `stream.end`.
 */
export async function runGeneration(
  ctx: Context,
  server: ServerContext,
  model: GenerativeModel,
  prompt: GenerationPrompt,
  parameters: GenerationParameters,
  stream?: StreamFormat,
): Promise<GenerationOutput | undefined> {
  const results = await runChoices(
    ctx,
    server,
    model,
    prompt,
    parameters,
    {},
    stream && { ...stream, end: (all) => stream.end(all[0]!) },
  );
  return results?.[0];
}

/**
 * `runGeneration` for `choices.n` independent sequences of one prompt (tokenized once), each
 * a job of the pool's; a stream interleaves their pieces as they come, each naming its choice.
 */
export async function runChoices(
  ctx: Context,
  server: ServerContext,
  model: GenerativeModel,
  prompt: GenerationPrompt,
  parameters: GenerationParameters,
  choices: ChoiceOptions,
  stream?: ChoicesStreamFormat,
): Promise<readonly ChoiceOutput[] | undefined> {
  ctx.state.model = model.name;
  checkPromptSize(prompt, server.config.maxPromptBytes);
  const abort = new AbortController();
  const onClose = () => {
    if (!ctx.res.writableFinished) abort.abort();
  };
  ctx.res.once('close', onClose);
  const early: StreamEvent[] = [];
  let sink: ((event: StreamEvent) => void | Promise<void>) | undefined = undefined;
  let firstText: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (firstText = resolve));
  const result = submitChoices(model.pool, prompt, parameters, choices, {
    signal: abort.signal,
    onText: (piece) => {
      if (sink) return sink({ piece });
      if (stream) {
        early.push({ piece });
        firstText();
      }
    },
    onEnd: (ended) => {
      if (!stream?.choiceEnd) return;
      if (sink) void sink({ ended });
      else early.push({ ended });
    },
  }).then((all) => {
    for (const r of all)
      server.models.generationMetrics.record(model.name, r.timeToFirstTokenMs, r.interTokenMs);
    return all;
  });
  if (!stream) {
    try {
      return await result;
    } finally {
      ctx.res.off('close', onClose);
    }
  }
  try {
    await Promise.race([first, result]);
  } catch (error) {
    ctx.res.off('close', onClose);
    throw error;
  }
  const out = new PassThrough();
  ctx.status = 200;
  ctx.type = stream.contentType;
  ctx.set('Cache-Control', 'no-cache');
  ctx.set('X-Accel-Buffering', 'no');
  ctx.body = out;
  const write = (event: StreamEvent): void | Promise<void> => {
    const text = 'piece' in event ? stream.piece(event.piece) : stream.choiceEnd!(event.ended);
    if (out.writableEnded || out.write(text)) return;
    // The client's socket is full: this job's next step waits for it to drain (or go away).
    return new Promise((resolve) => {
      out.once('drain', resolve);
      ctx.res.once('close', resolve);
    });
  };
  for (const event of early) void write(event);
  sink = write;
  result
    .then(
      (r) => out.end(stream.end(r)),
      (error: unknown) =>
        out.end(stream.error(KilnError.wrap(error, KilnErrorCode.Internal, 'generation failed'))),
    )
    .finally(() => ctx.res.off('close', onClose));
  return undefined;
}

/**
 * Tokenizes a prompt (a chat through the model's template) and submits it to a generation
 * pool, once per choice; `onText` gets each piece of text as soon as it may be shown (a
 * promise it returns holds that choice's next step). A seeded request seeds choice i with
 * seed + i: its choices differ from each other and repeat from request to request.
 */
async function submitChoices(
  pool: GenerationPool,
  prompt: GenerationPrompt,
  parameters: GenerationParameters,
  choices: ChoiceOptions,
  options: {
    signal: AbortSignal;
    onText: (piece: TextPiece) => void | Promise<void>;
    /** Each choice's result as soon as it ends, after its last piece. */
    onEnd?: (result: ChoiceOutput) => void;
  },
): Promise<ChoiceOutput[]> {
  const { responseFormat } = choices;
  const [promptTokens] = await Promise.all([
    typeof prompt === 'string'
      ? pool.encode(prompt)
      : pool.encodeChat(prompt.messages, prompt.tools),
    responseFormat && pool.checkResponseFormat(responseFormat),
  ]);
  options.signal.throwIfAborted();
  // One choice failing ends the others: the request fails as a whole.
  const abort = new AbortController();
  const cancel = () => abort.abort();
  options.signal.addEventListener('abort', cancel, { once: true });
  const { seed } = parameters;
  const runs = Array.from({ length: choices.n ?? 1 }, (_, index) => {
    const logprobs: TokenLogprobs[] = [];
    const job: GenerationJob = {
      promptTokens,
      maxNewTokens: parameters.maxNewTokens,
      sampling: seed === undefined ? parameters : { ...parameters, seed: seed + index },
      stop: parameters.stop,
      ...(choices.logprobs ? { logprobs: true, topLogprobs: choices.topLogprobs ?? 0 } : {}),
      ...(responseFormat ? { responseFormat } : {}),
    };
    const handle = pool.submit(job, {
      signal: abort.signal,
      onChunk: (chunk) => {
        const {
          text,
          token,
          index: at,
          logprob,
          tokenText,
          topLogprobs,
        } = chunk as GenerationChunk;
        // A step handler that chose the token itself gave no logits to tell its probability.
        const noLogprob = logprob === undefined || Number.isNaN(logprob);
        if (choices.logprobs && at === logprobs.length && noLogprob)
          throw new KilnError(
            KilnErrorCode.InvalidInput,
            'this model chooses its tokens in its own step handler and gives no log-probabilities',
          );
        // A chunk repeating the last token (text held for a stop string) adds no token.
        const entry =
          logprob !== undefined && at === logprobs.length
            ? { token, text: tokenText ?? '', logprob, top: topLogprobs ?? [] }
            : undefined;
        if (entry) logprobs.push(entry);
        if (text || entry)
          return options.onText({ text, token, index, ...(entry ? { logprobs: entry } : {}) });
      },
    });
    return handle.result.then((output) => {
      const result: ChoiceOutput = { ...output, index, ...(choices.logprobs ? { logprobs } : {}) };
      options.onEnd?.(result);
      return result;
    });
  });
  try {
    return await Promise.all(runs);
  } catch (error) {
    abort.abort();
    throw error;
  } finally {
    options.signal.removeEventListener('abort', cancel);
  }
}
