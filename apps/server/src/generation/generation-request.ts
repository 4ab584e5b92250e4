import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import { type GenerationParameters, KilnError, KilnErrorCode } from '@kiln/core';
import { type TextGenerationResult, generateText } from '@kiln/batching';
import { type BodyLimits, readBody } from '../http/read-body.js';
import { type ServerContext, bodyLimits } from '../routes/server-context.js';
import type { GenerativeModel } from './generative-model.js';
import { streamingTokenizer } from './streaming-tokenizer.js';

/**
 * The generative model a prediction names; undefined when it names something else or nothing
 * known, so that the inference routes answer it as they would any prediction.
 */
export function generativeModel(
  server: ServerContext,
  name: string,
  version: string | undefined,
): GenerativeModel | undefined {
  let entry;
  try {
    entry = server.models.get(name, version);
  } catch {
    return undefined;
  }
  if (!entry.generator) return undefined;
  if (!server.accepting) throw new KilnError(KilnErrorCode.Closed, 'server is shutting down');
  return entry.generator;
}

/** The generative model a generation route names; anything else is a client error. */
export function requireGenerativeModel(
  server: ServerContext,
  name: string,
  version: string | undefined,
): GenerativeModel {
  if (!server.accepting) throw new KilnError(KilnErrorCode.Closed, 'server is shutting down');
  const entry = server.models.get(name, version);
  if (!entry.generator) {
    if (entry.state === 'PENDING')
      throw new KilnError(KilnErrorCode.ModelNotReady, `model ${name} is still loading`);
    if (entry.state === 'FAILED')
      throw new KilnError(
        KilnErrorCode.ModelLoadFailed,
        `model ${name} failed to load: ${entry.error ?? ''}`,
      );
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `model ${name} does not generate text (its serving.properties has no option.rolling_batch)`,
    );
  }
  return entry.generator;
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

export interface TextPiece {
  readonly text: string;
  readonly token: number;
}

export interface StreamFormat {
  readonly contentType: string;
  piece(piece: TextPiece): string;
  end(result: TextGenerationResult): string;
  error(error: KilnError): string;
}

/**
 * Refuses a prompt longer than max_prompt_bytes before any work on it: tokenizing takes time
 * in proportion (seconds for a megabyte of byte-level BPE), and what the model cannot hold is
 * known only after it.
 */
function checkPromptSize(prompt: string, maxPromptBytes: number): void {
  // Each UTF-16 unit is at least one UTF-8 byte: most long prompts are refused without a scan.
  if (prompt.length > maxPromptBytes || Buffer.byteLength(prompt) > maxPromptBytes)
    throw new KilnError(
      KilnErrorCode.PayloadTooLarge,
      `the prompt is longer than max_prompt_bytes (${maxPromptBytes} bytes)`,
    );
}

/**
 * Runs one generation for an HTTP request. A client that goes away aborts it, so its slot is
 * free at the next step. Without `stream` it answers the result; with one, nothing is sent
 * until the first text or the end (so refusals still get their status), then each piece as
 * it comes, then `stream.end`.
 */
export async function runGeneration(
  ctx: Context,
  server: ServerContext,
  model: GenerativeModel,
  prompt: string,
  parameters: GenerationParameters,
  stream?: StreamFormat,
): Promise<TextGenerationResult | undefined> {
  ctx.state.model = model.name;
  checkPromptSize(prompt, server.config.maxPromptBytes);
  const abort = new AbortController();
  const onClose = () => {
    if (!ctx.res.writableFinished) abort.abort();
  };
  ctx.res.once('close', onClose);
  const early: TextPiece[] = [];
  let sink: ((piece: TextPiece) => void) | undefined = undefined;
  let firstText: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (firstText = resolve));
  const tokenizer = streamingTokenizer(model.tokenizers);
  const result = generateText(model.scheduler, tokenizer, prompt, parameters, {
    signal: abort.signal,
    onText: (text, token) => {
      if (sink) sink({ text, token });
      else if (stream) {
        early.push({ text, token });
        firstText();
      }
    },
  })
    .then((r) => {
      server.models.generationMetrics.record(model.name, r.timeToFirstTokenMs, r.interTokenMs);
      return r;
    })
    .finally(() => tokenizer.end());
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
  const write = (piece: TextPiece) => {
    if (!out.writableEnded) out.write(stream.piece(piece));
  };
  for (const piece of early) write(piece);
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
