import { describe, expect, it } from 'vitest';
import { type StreamingServer, runStreamed } from './streamed-requests.js';

/** A server answering after `ms` per token, recording the most requests it held at once. */
function fakeServer(msPerToken: number) {
  let inFlight = 0;
  const seen = { most: 0 };
  const server: StreamingServer = {
    name: 'fake',
    async generate(_prompt, maxNewTokens) {
      inFlight++;
      seen.most = Math.max(seen.most, inFlight);
      const sentAt = performance.now();
      await new Promise((resolve) => setTimeout(resolve, msPerToken));
      const firstAt = performance.now();
      await new Promise((resolve) => setTimeout(resolve, msPerToken * (maxNewTokens - 1)));
      inFlight--;
      return { tokens: maxNewTokens, text: '', sentAt, firstAt, lastAt: performance.now() };
    },
  };
  return { server, seen };
}

describe('runStreamed', () => {
  it('never has more than `concurrency` requests in flight, and counts every token', async () => {
    const requests = Array.from({ length: 9 }, (_, i) => ({
      prompt: 'p',
      maxNewTokens: 2 + (i % 3),
      arrivalMs: i,
    }));
    for (const concurrency of [1, 3]) {
      const { server, seen } = fakeServer(2);
      const figures = await runStreamed(server, requests, concurrency);
      expect(seen.most).toBe(concurrency);
      expect(figures.tokens).toBe(27);
      expect(figures.answers.map((a) => a.tokens)).toEqual(requests.map((r) => r.maxNewTokens));
      expect(figures.msPerToken).toBeGreaterThanOrEqual(1.5);
    }
  });
});
