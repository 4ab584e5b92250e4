import http from 'node:http';

export interface LoadResult {
  readonly requests: number;
  readonly errors: number;
  readonly seconds: number;
  readonly throughput: number;
  /** Latency percentiles, ms. */
  readonly p50: number;
  readonly p99: number;
  readonly statuses: Record<number, number>;
}

export interface LoadOptions {
  readonly url: string;
  readonly body: Buffer;
  readonly headers?: Record<string, string>;
  readonly concurrency: number;
  readonly durationMs: number;
  /** Checked on every 200 answer; throwing counts an error. */
  readonly check?: (body: Buffer) => void;
}

/** Closed-loop HTTP load: `concurrency` clients, each sending its next request when answered. */
export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.concurrency });
  const url = new URL(options.url);
  const latencies: number[] = [];
  const statuses: Record<number, number> = {};
  let errors = 0;
  const started = performance.now();
  const deadline = started + options.durationMs;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const request = http.request(
        {
          agent,
          host: url.hostname,
          port: url.port,
          path: url.pathname + url.search,
          method: 'POST',
          headers: { 'content-length': options.body.byteLength, ...options.headers },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (c: Buffer) => chunks.push(c));
          response.on('end', () => {
            const status = response.statusCode ?? 0;
            statuses[status] = (statuses[status] ?? 0) + 1;
            if (status !== 200) errors++;
            else {
              try {
                options.check?.(Buffer.concat(chunks));
              } catch {
                errors++;
              }
            }
            latencies.push(performance.now() - t0);
            resolve();
          });
        },
      );
      request.on('error', () => {
        errors++;
        resolve();
      });
      request.end(options.body);
    });
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      while (performance.now() < deadline) await one();
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    requests: latencies.length,
    errors,
    seconds,
    throughput: (latencies.length - errors) / seconds,
    p50: at(0.5),
    p99: at(0.99),
    statuses,
  };
}

/** Pings `url` every `intervalMs` until stopped; returns latency percentiles in ms. */
export function pingWhile(
  url: string,
  intervalMs = 20,
): { stop(): Promise<{ p50: number; p99: number; count: number }> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      await new Promise<void>((resolve) => {
        http
          .get(url, { agent }, (r) => {
            r.resume();
            r.on('end', () => resolve());
          })
          .on('error', () => resolve());
      });
      latencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      agent.destroy();
      latencies.sort((a, b) => a - b);
      const at = (q: number) =>
        latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
      return { p50: at(0.5), p99: at(0.99), count: latencies.length };
    },
  };
}
