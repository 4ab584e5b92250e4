import { type StepDecoder, TokenSampler } from '@kiln/core';
import { type GenerationJob, systemClock } from '@kiln/batching';
import type { GenerationFigures } from './workload.js';

interface Waiting {
  readonly request: GenerationJob;
  readonly submittedAt: number;
  readonly resolve: (result: GenerationFigures) => void;
}

/**
 * Request-level batching, the way a dynamic batcher serves a generative model: take up to
 * `batchSize` waiting requests, prefill them together, then decode them in lockstep until the
 * last one ends; only then take the next batch. Finished members leave the steps (kinder
 * than padding them on), but newcomers still wait for the batch's longest member.
 * `batchSize` 1 is one request at a time.
 */
export class RequestLevelBatcher<S> {
  private readonly waiting: Waiting[] = [];
  private running = false;

  constructor(
    private readonly decoder: StepDecoder<S>,
    readonly batchSize: number,
  ) {}

  generate(request: GenerationJob): Promise<GenerationFigures> {
    return new Promise((resolve) => {
      this.waiting.push({ request, submittedAt: systemClock.now(), resolve });
      if (!this.running) {
        this.running = true;
        void this.loop().finally(() => (this.running = false));
      }
    });
  }

  private async loop(): Promise<void> {
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.batchSize).map((w) => ({
        ...w,
        state: this.decoder.open(),
        sampler: new TokenSampler(w.request.sampling),
        history: [...w.request.promptTokens],
        generated: [] as number[],
        interTokenMs: [] as number[],
        firstTokenMs: undefined as number | undefined,
        lastAt: 0,
        done: false,
      }));
      let feeds = batch.map((b) => b.request.promptTokens);
      let members = batch;
      while (members.length > 0) {
        const outputs = await this.decoder.step(
          members.map((m, i) => ({ state: m.state, tokens: feeds[i]! })),
        );
        const now = systemClock.now();
        members.forEach((m, i) => {
          const output = outputs[i]!;
          const token = typeof output === 'number' ? output : m.sampler.next(output, m.history);
          if (m.firstTokenMs === undefined) m.firstTokenMs = now - m.submittedAt;
          else m.interTokenMs.push(now - m.lastAt);
          m.lastAt = now;
          m.generated.push(token);
          m.history.push(token);
          if (m.generated.length >= m.request.maxNewTokens) {
            m.done = true;
            this.decoder.release(m.state);
            m.resolve({
              tokens: m.generated,
              timeToFirstTokenMs: m.firstTokenMs,
              interTokenMs: m.interTokenMs,
            });
          }
        });
        members = members.filter((m) => !m.done);
        feeds = members.map((m) => [m.generated[m.generated.length - 1]!]);
      }
    }
  }
}
