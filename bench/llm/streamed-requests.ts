// Streamed generation requests as a client sees them: when each request was sent, when its
// first and last token came, how many tokens it got and their text; and a run of such requests
// at their arrival times with at most so many in flight.
import { quantile } from '../harness/figures.js';

export interface StreamedAnswer {
  /** Tokens the answer generated (the end token not counted). */
  readonly tokens: number;
  readonly text: string;
  /** performance.now() when the request was sent, its first token came, its last token came. */
  readonly sentAt: number;
  readonly firstAt: number;
  readonly lastAt: number;
  /** The prompt's tokens, when the server tells. */
  readonly promptTokens?: number;
  /** The answer's token ids, when the server tells them. */
  readonly ids?: readonly number[];
}

/** One server's way of generating `maxNewTokens` tokens greedily after `prompt`, streamed. */
export interface StreamingServer {
  readonly name: string;
  generate(prompt: string, maxNewTokens: number): Promise<StreamedAnswer>;
}

/** Posts `body` as JSON and hands each JSON line of the streamed answer to `onLine` as it comes. */
export async function postJsonLines(
  url: string,
  body: unknown,
  onLine: (value: Record<string, unknown>) => void,
): Promise<void> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!response.ok || !response.body)
    throw new Error(`${url}: ${response.status} ${await response.text()}`);
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of response.body) {
    pending += decoder.decode(chunk as Uint8Array, { stream: true });
    let end: number;
    while ((end = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, end).trim();
      pending = pending.slice(end + 1);
      if (!line) continue;
      const value = JSON.parse(line) as Record<string, unknown>;
      if (value.error !== undefined) throw new Error(`${url}: ${JSON.stringify(value.error)}`);
      onLine(value);
    }
  }
}

/** Kiln's DJL LMI route, streamed as JSON lines: one line per token with text, then the end. */
export function kilnLmiServer(name: string, url: string): StreamingServer {
  return {
    name,
    async generate(prompt, maxNewTokens) {
      const sentAt = performance.now();
      let firstAt = Number.NaN;
      let lastAt = Number.NaN;
      let end: { text: string; tokens: number; promptTokens: number } | undefined;
      await postJsonLines(
        url,
        {
          inputs: prompt,
          parameters: { max_new_tokens: maxNewTokens, do_sample: false },
          stream: true,
        },
        (line) => {
          const now = performance.now();
          if (line.token !== null) {
            // A token whose text is not whole yet (part of a character) has no line of its own.
            if (Number.isNaN(firstAt)) firstAt = now;
            lastAt = now;
            return;
          }
          const details = line.details as { generated_tokens: number; prompt_tokens: number };
          end = {
            text: line.generated_text as string,
            tokens: details.generated_tokens,
            promptTokens: details.prompt_tokens,
          };
          // No token had text of its own: the end brings it.
          if (Number.isNaN(firstAt)) firstAt = lastAt = now;
        },
      );
      if (!end) throw new Error(`${url}: the stream ended without its last line`);
      return { ...end, sentAt, firstAt, lastAt };
    },
  };
}

/** The naive transformers.js server (transformers-js-server.mjs): one line per token. */
export function transformersJsServer(name: string, url: string): StreamingServer {
  return {
    name,
    async generate(prompt, maxNewTokens) {
      const sentAt = performance.now();
      let firstAt = Number.NaN;
      let lastAt = Number.NaN;
      const ids: number[] = [];
      let text: string | undefined;
      await postJsonLines(`${url}/generate`, { prompt, max_new_tokens: maxNewTokens }, (line) => {
        if (typeof line.token === 'number') {
          const now = performance.now();
          if (Number.isNaN(firstAt)) firstAt = now;
          lastAt = now;
          ids.push(line.token);
        } else if (typeof line.generated_text === 'string') text = line.generated_text;
      });
      if (text === undefined) throw new Error(`${url}: the stream ended without its last line`);
      return { tokens: ids.length, text, ids, sentAt, firstAt, lastAt };
    },
  };
}

export interface StreamedRequest {
  readonly prompt: string;
  readonly maxNewTokens: number;
  /** ms after the run's start. */
  readonly arrivalMs: number;
}

export interface StreamedRunFigures {
  readonly tokens: number;
  readonly wallMs: number;
  readonly tokensPerS: number;
  /** From sending a request to its first token: a request waiting for a free slot is not sent yet. */
  readonly ttftP50Ms: number;
  readonly ttftP90Ms: number;
  /** Each answer's time from its first to its last token over its tokens after the first, summed. */
  readonly msPerToken: number;
  readonly answers: readonly StreamedAnswer[];
}

/**
 * Sends each request at its arrival time, or once fewer than `concurrency` are in flight;
 * measures from the first arrival to the last answer.
 */
export async function runStreamed(
  server: StreamingServer,
  requests: readonly StreamedRequest[],
  concurrency: number,
): Promise<StreamedRunFigures> {
  const waiting: (() => void)[] = [];
  let inFlight = 0;
  // A finished request hands its slot to the longest waiting one, if any.
  const slot = async () => {
    if (inFlight < concurrency) inFlight++;
    else await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else inFlight--;
  };
  const start = performance.now();
  const answers = await Promise.all(
    requests.map(async (request) => {
      const wait = request.arrivalMs - (performance.now() - start);
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      await slot();
      try {
        return await server.generate(request.prompt, request.maxNewTokens);
      } finally {
        release();
      }
    }),
  );
  const wallMs = performance.now() - start;
  const tokens = answers.reduce((n, a) => n + a.tokens, 0);
  const ttfts = answers.map((a) => a.firstAt - a.sentAt);
  const decoding = answers.filter((a) => a.tokens > 1);
  return {
    tokens,
    wallMs,
    tokensPerS: (tokens / wallMs) * 1000,
    ttftP50Ms: quantile(ttfts, 0.5),
    ttftP90Ms: quantile(ttfts, 0.9),
    msPerToken:
      decoding.reduce((ms, a) => ms + (a.lastAt - a.firstAt), 0) /
      decoding.reduce((n, a) => n + a.tokens - 1, 0),
    answers,
  };
}
