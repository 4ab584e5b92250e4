import { PassThrough } from 'node:stream';
import type { Context } from 'koa';
import { type GenerationParameters, KilnError, KilnErrorCode } from '@kiln/core';
import { type TextGenerationResult, generateText } from '@kiln/batching';
import { readBody } from '../http/read-body.js';
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

/** The request body as a JSON object; anything else is INVALID_INPUT. */
export async function readJsonObject(
  ctx: Context,
  server: ServerContext,
): Promise<Record<string, unknown>> {
  const body = await readBody(ctx.req, bodyLimits(server));
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
  const abort = new AbortController();
  const onClose = () => {
    if (!ctx.res.writableFinished) abort.abort();
  };
  ctx.res.once('close', onClose);
  const early: TextPiece[] = [];
  let sink: ((piece: TextPiece) => void) | undefined = undefined;
  let firstText: () => void = () => undefined;
  const first = new Promise<void>((resolve) => (firstText = resolve));
  const tokenizer = streamingTokenizer(model.tokenizer);
  const result = generateText(model.scheduler, tokenizer, prompt, parameters, {
    signal: abort.signal,
    onText: (text, token) => {
      if (sink) sink({ text, token });
      else if (stream) {
        early.push({ text, token });
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
