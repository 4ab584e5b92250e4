import type { FinishReason } from '@kiln/batching';
import type {
  ChoiceOutput,
  ChoicesStreamFormat,
  TextPiece,
  TokenLogprobs,
} from './generation-request.js';

/** OpenAI's finish reasons: an end-of-sequence token or a stop string are both 'stop'. */
export const openAiFinish = (reason: FinishReason) => (reason === 'length' ? 'length' : 'stop');

const sse = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
const utf8 = (text: string) => Array.from(Buffer.from(text, 'utf8'));
/** Offsets count characters (code points), as OpenAI's Python servers do. */
const characters = (text: string) => [...text].length;

/** Chat's `logprobs` of some tokens: each one's text, bytes and the step's most likely. */
export function chatLogprobs(tokens: readonly TokenLogprobs[]) {
  return {
    content: tokens.map((t) => ({
      token: t.text,
      logprob: t.logprob,
      bytes: utf8(t.text),
      top_logprobs: t.top.map((a) => ({ token: a.text, logprob: a.logprob, bytes: utf8(a.text) })),
    })),
    refusal: null,
  };
}

/**
 * The legacy completions' `logprobs` of some tokens; `text_offset` is where each token's text
 * begins in the generated text, counting from `offset`.
 */
export function completionLogprobs(tokens: readonly TokenLogprobs[], offset = 0) {
  const textOffset: number[] = [];
  let at = offset;
  for (const t of tokens) {
    textOffset.push(at);
    at += characters(t.text);
  }
  return {
    tokens: tokens.map((t) => t.text),
    token_logprobs: tokens.map((t) => t.logprob),
    top_logprobs: tokens.map((t) => Object.fromEntries(t.top.map((a) => [a.text, a.logprob]))),
    text_offset: textOffset,
  };
}

/** Tokens of the prompt once and of every choice, as OpenAI counts a request of n choices. */
export function openAiUsage(results: readonly ChoiceOutput[]) {
  const prompt = results[0]?.promptTokens ?? 0;
  const completion = results.reduce((sum, r) => sum + r.tokens.length, 0);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
  };
}

/** The body of a non-streamed answer: one choice per sequence, and the usage of all. */
export function openAiAnswer(
  chat: boolean,
  head: Record<string, unknown>,
  results: readonly ChoiceOutput[],
) {
  return {
    ...head,
    choices: results.map((r) => {
      const finish_reason = openAiFinish(r.finishReason);
      return chat
        ? {
            index: r.index,
            message: { role: 'assistant', content: r.text },
            logprobs: r.logprobs ? chatLogprobs(r.logprobs) : null,
            finish_reason,
          }
        : {
            index: r.index,
            text: r.text,
            logprobs: r.logprobs ? completionLogprobs(r.logprobs) : null,
            finish_reason,
          };
    }),
    usage: openAiUsage(results),
  };
}

/**
 * OpenAI's server-sent events for the choices of one request: each piece a chunk naming its
 * choice (chat's first for each choice carries the assistant's role), each choice's finish
 * reason as soon as it ends, then — with `stream_options.include_usage` — a chunk of no
 * choices and the usage, then `[DONE]`. `error` ends a stream a failure cut short.
 */
export function openAiStream(
  chat: boolean,
  head: Record<string, unknown>,
  includeUsage: boolean,
  error: ChoicesStreamFormat['error'],
): ChoicesStreamFormat {
  const started = new Set<number>();
  const offsets = new Map<number, number>();
  const chatChoice = (p: TextPiece) => {
    const first = !started.has(p.index);
    started.add(p.index);
    return {
      index: p.index,
      delta: first ? { role: 'assistant', content: p.text } : { content: p.text },
      logprobs: p.logprobs ? chatLogprobs([p.logprobs]) : null,
      finish_reason: null,
    };
  };
  const completionChoice = (p: TextPiece) => {
    const offset = offsets.get(p.index) ?? 0;
    if (p.logprobs) offsets.set(p.index, offset + characters(p.logprobs.text));
    return {
      index: p.index,
      text: p.text,
      logprobs: p.logprobs ? completionLogprobs([p.logprobs], offset) : null,
      finish_reason: null,
    };
  };
  return {
    contentType: 'text/event-stream',
    piece: (p) => sse({ ...head, choices: [chat ? chatChoice(p) : completionChoice(p)] }),
    choiceEnd: (r) => {
      const finish_reason = openAiFinish(r.finishReason);
      const choice = chat
        ? { index: r.index, delta: {}, logprobs: null, finish_reason }
        : { index: r.index, text: '', logprobs: null, finish_reason };
      return sse({ ...head, choices: [choice] });
    },
    end: (results) => {
      const usage = includeUsage ? sse({ ...head, choices: [], usage: openAiUsage(results) }) : '';
      return `${usage}data: [DONE]\n\n`;
    },
    error,
  };
}
