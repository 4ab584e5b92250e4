import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import { type ChatMessage, type GenerationParameters, KilnError, KilnErrorCode } from '@kiln/core';
import type { GenerationChunk, GenerationJob, GenerationOutput } from '@kiln/batching';
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

export interface TextPiece {
  readonly text: string;
  readonly token: number;
}

export interface StreamFormat {
  readonly contentType: string;
  piece(piece: TextPiece): string;
  end(result: GenerationOutput): string;
  error(error: KilnError): string;
}

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
  ctx.state.model = model.name;
  checkPromptSize(prompt, server.config.maxPromptBytes);
  const abort = new AbortController();
  const onClose = () => {
    if (!ctx.res.writableFinished) abort.abort();
  };
  ctx.res.once('close', onClose);
  const early: TextPiece[] = [];
  let sink: ((piece: TextPiece) => void | Promise<void>) | undefined = undefined;
  let firstText: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (firstText = resolve));
  const result = submitGeneration(model.pool, prompt, parameters, {
    signal: abort.signal,
    onText: (piece) => {
      if (sink) return sink(piece);
      if (stream) {
        early.push(piece);
        firstText();
      }
    },
  }).then((r) => {
    server.models.generationMetrics.record(model.name, r.timeToFirstTokenMs, r.interTokenMs);
    return r;
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
  const write = (piece: TextPiece): void | Promise<void> => {
    if (out.writableEnded || out.write(stream.piece(piece))) return;
    // The client's socket is full: this job's next step waits for it to drain (or go away).
    return new Promise((resolve) => {
      out.once('drain', resolve);
      ctx.res.once('close', resolve);
    });
  };
  for (const piece of early) void write(piece);
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
 * pool; `onText` gets each piece of text as soon as it may be shown (a promise it returns
 * holds the job's next step).
 */
async function submitGeneration(
  pool: GenerationPool,
  prompt: GenerationPrompt,
  parameters: GenerationParameters,
  options: { signal: AbortSignal; onText: (piece: TextPiece) => void | Promise<void> },
): Promise<GenerationOutput> {
  const promptTokens = await (typeof prompt === 'string'
    ? pool.encode(prompt)
    : pool.encodeChat(prompt.messages, prompt.tools));
  options.signal.throwIfAborted();
  const job: GenerationJob = {
    promptTokens,
    maxNewTokens: parameters.maxNewTokens,
    sampling: parameters,
    stop: parameters.stop,
  };
  return pool.submit(job, {
    signal: options.signal,
    onChunk: (chunk) => {
      const { text, token } = chunk as GenerationChunk;
      if (text) return options.onText({ text, token });
    },
  }).result;
}
