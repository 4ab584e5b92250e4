import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import type { Context } from 'koa';
import { type ChatMessage, KilnError, KilnErrorCode, parseGenerationParameters } from '@kiln/core';
import type { GenerationOutput } from '@kiln/batching';
import { openAiFieldError, openAiStreamError } from '../http/openai-error.js';
import type { ModelEntry } from '../models/model-entry.js';
import type { ServerContext } from '../routes/server-context.js';
import {
  type GenerationPrompt,
  type GenerativeModel,
  readJsonObject,
  requireGenerativeModel,
  runChoices,
  runGeneration,
} from './generation-request.js';
import { openAiAnswer, openAiStream } from './openai-choices.js';
import {
  checkOpenAiRequest,
  inOpenAiTerms,
  openAiChoices,
  openAiParameters,
} from './openai-request.js';

const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
const line = (data: unknown) => `${JSON.stringify(data)}\n`;
const errorBody = (error: KilnError) => ({ error: { code: error.code, message: error.message } });

function text(body: Record<string, unknown>, key: string): string {
  const value = body[key];
  if (typeof value !== 'string')
    throw new KilnError(KilnErrorCode.InvalidInput, `${key} must be a string`);
  return value;
}

/** The fields of a DJL LMI request body (`/predictions/{model}`). */
const LMI_BODY_KEYS = new Set(['inputs', 'parameters', 'stream']);

/** Whether a model generates text, loaded or not (its serving.properties say). */
export const generatesText = (entry: ModelEntry) => entry.kind === 'step';

/**
 * DJL LMI's `/predictions/{model}` for a text-generation model: JSON, or JSON lines when
 * streamed. The inference routes' one prediction handler calls it for such models.
 */
export async function lmiPrediction(
  ctx: Context,
  server: ServerContext,
  name: string,
  version: string | undefined,
): Promise<void> {
  const model = requireGenerativeModel(server, name, version);
  const body = await readJsonObject(ctx, server);
  if (Array.isArray(body.inputs))
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      'inputs must be one string; send one request per prompt',
    );
  const prompt = text(body, 'inputs');
  const extra = Object.keys(body).find((key) => !LMI_BODY_KEYS.has(key));
  if (extra !== undefined)
    throw new KilnError(
      KilnErrorCode.InvalidInput,
      `unknown field ${extra}: a generation request has inputs, parameters and stream`,
    );
  if (body.stream !== undefined && typeof body.stream !== 'boolean')
    throw new KilnError(KilnErrorCode.InvalidInput, 'stream must be true or false');
  const parameters = parseGenerationParameters(body.parameters, model.pool.generationDefaults);
  const accept = ctx.get('accept');
  const streamed = body.stream === true || /jsonlines|x-ndjson/.test(accept);
  const result = await runGeneration(
    ctx,
    server,
    model,
    prompt,
    parameters,
    streamed
      ? {
          contentType: 'application/jsonlines',
          piece: (p) => line({ token: { id: p.token, text: p.text }, generated_text: null }),
          end: (r) => line({ token: null, generated_text: r.text, details: details(r) }),
          error: (e) => line(errorBody(e)),
        }
      : undefined,
  );
  if (result) ctx.body = { generated_text: result.text, details: details(result) };
}

/**
 * Text generation over HTTP besides `/predictions`: the KServe v2 generate extension
 * (`/generate`, `/generate_stream` as server-sent events) and OpenAI's `/v1/completions` and
 * `/v1/chat/completions`.
 */
export function generationRoutes(server: ServerContext): Router {
  const router = new Router();

  const v2 = async (ctx: Context, streamed: boolean) => {
    ctx.state.errorStyle = 'v2';
    const name = ctx.params.model!;
    const version = ctx.params.version;
    const model = requireGenerativeModel(server, name, version);
    const body = await readJsonObject(ctx, server);
    const prompt = text(body, 'text_input');
    // Parameters may sit at the top level (Triton) or under "parameters".
    const { text_input: _, parameters: nested, max_tokens: maxTokens, ...top } = body;
    if (nested !== undefined && (typeof nested !== 'object' || !nested || Array.isArray(nested)))
      throw new KilnError(KilnErrorCode.InvalidInput, '"parameters" must be a JSON object');
    if (maxTokens != null && !(Number.isInteger(maxTokens) && Number(maxTokens) >= 1))
      throw new KilnError(KilnErrorCode.InvalidInput, 'max_tokens must be an integer >= 1');
    const parameters = parseGenerationParameters(
      { max_new_tokens: maxTokens, ...top, ...(nested as object | undefined) },
      model.pool.generationDefaults,
    );
    const head = { model_name: name, model_version: version ?? '' };
    const result = await runGeneration(
      ctx,
      server,
      model,
      prompt,
      parameters,
      streamed
        ? {
            contentType: 'text/event-stream',
            piece: (p) => sse({ ...head, text_output: p.text }),
            end: (r) => sse({ ...head, text_output: '', finish_reason: r.finishReason }),
            error: (e) => sse({ error: e.message }),
          }
        : undefined,
    );
    if (result)
      ctx.body = { ...head, text_output: result.text, finish_reason: result.finishReason };
  };
  for (const base of ['/v2/models/:model', '/v2/models/:model/versions/:version']) {
    router.post(`${base}/generate`, (ctx) => v2(ctx, false));
    router.post(`${base}/generate_stream`, (ctx) => v2(ctx, true));
  }

  router.get('/v1/models', (ctx) => {
    ctx.body = {
      object: 'list',
      data: server.models.list().filter(generatesText).map(openAiModelOf),
    };
  });
  router.get('/v1/models/:model', (ctx) => {
    ctx.state.errorStyle = 'openai';
    const name = ctx.params.model!;
    const entry = server.models.list().find((e) => e.name === name && generatesText(e));
    if (!entry)
      throw new KilnError(
        KilnErrorCode.ModelNotFound,
        `The model '${name}' does not exist or does not generate text.`,
      );
    ctx.body = openAiModelOf(entry);
  });

  const errorOptions = {
    overloadStatus: server.config.overloadStatus,
    retryAfterS: server.config.retryAfterS,
  };
  const openAi = async (ctx: Context, chat: boolean) => {
    ctx.state.errorStyle = 'openai';
    const body = await readJsonObject(ctx, server);
    checkOpenAiRequest(body, chat ? 'chat' : 'completions');
    const model = requireGenerativeModel(server, openAiModel(server, body), undefined);
    const prompt = chat ? chatPrompt(model, body) : completionPrompt(body.prompt);
    const parameters = openAiParameters(body, model.pool.generationDefaults);
    const id = `${chat ? 'chatcmpl' : 'cmpl'}-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    const object = chat ? 'chat.completion' : 'text_completion';
    const head = { id, object, created, model: model.name };
    const chunkHead = { ...head, object: chat ? 'chat.completion.chunk' : 'text_completion' };
    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)
      ?.include_usage;
    const results = await runChoices(
      ctx,
      server,
      model,
      prompt,
      parameters,
      openAiChoices(body, chat ? 'chat' : 'completions'),
      body.stream === true
        ? openAiStream(chat, chunkHead, includeUsage === true, (e) => {
            const error = inOpenAiTerms(e, body) as KilnError;
            return `${sse(openAiStreamError(error, errorOptions))}data: [DONE]\n\n`;
          })
        : undefined,
    ).catch((error: unknown) => {
      throw inOpenAiTerms(error, body);
    });
    if (results) ctx.body = openAiAnswer(chat, head, results);
  };
  router.post('/v1/completions', (ctx) => openAi(ctx, false));
  router.post('/v1/chat/completions', (ctx) => openAi(ctx, true));
  return router;
}

function details(r: GenerationOutput) {
  return {
    finish_reason: r.finishReason,
    generated_tokens: r.tokens.length,
    prompt_tokens: r.promptTokens,
  };
}

/** A text-generation model as OpenAI's model objects describe one. */
function openAiModelOf(entry: ModelEntry) {
  return {
    id: entry.name,
    object: 'model',
    created: Math.floor(entry.registeredAt.getTime() / 1000),
    owned_by: 'kiln',
  };
}

/** The model an OpenAI request names; may be left out when one model generates text. */
function openAiModel(server: ServerContext, body: Record<string, unknown>): string {
  if (typeof body.model === 'string') return body.model;
  const names = server.models
    .list()
    .filter(generatesText)
    .map((e) => e.name);
  if (body.model == null && names.length === 1) return names[0]!;
  throw openAiFieldError(
    'model',
    'missing_required_parameter',
    `model must name a text-generation model (${names.join(', ') || 'none is loaded'})`,
  );
}

function completionPrompt(prompt: unknown): string {
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === 'string')
    return prompt[0];
  throw new KilnError(KilnErrorCode.InvalidInput, 'prompt must be one string');
}

/**
 * A chat's prompt: its messages (and tools) for the model's own chat template
 * (tokenizer_config.json), rendered beside its tokenizer; without one, the plain template.
 */
function chatPrompt(model: GenerativeModel, body: Record<string, unknown>): GenerationPrompt {
  const template = model.pool.chatTemplate;
  const tools = Array.isArray(body.tools) && body.tools.length > 0 ? body.tools : undefined;
  if (tools && !template?.usesTools)
    throw openAiFieldError(
      'tools',
      'unsupported_parameter',
      `Unsupported parameter: 'tools' is not supported by ${model.name}: its chat template has no place for tools.`,
    );
  if (!template) return plainChatPrompt(body.messages);
  return { messages: body.messages as ChatMessage[], ...(tools ? { tools } : {}) };
}

/** A plain-text chat template: one "role: content" line per message, then "assistant: ". */
function plainChatPrompt(messages: unknown): string {
  if (!Array.isArray(messages) || messages.length === 0)
    throw new KilnError(KilnErrorCode.InvalidInput, 'messages must be a non-empty array');
  const lines = messages.map((m: unknown) => {
    const { role, content } = (m ?? {}) as { role?: unknown; content?: unknown };
    if (typeof role !== 'string' || typeof content !== 'string')
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        'each message needs a string role and content',
      );
    return `${role}: ${content}\n`;
  });
  return `${lines.join('')}assistant: `;
}
