import http from 'node:http';
import { KilnError, KilnErrorCode } from '@kiln/core';
import type { PreparedRequest } from '../inputs/http-bodies.js';

/** Replies kept when a request fails, for its message; larger bodies are cut. */
const ERROR_BODY_BYTES = 300;

/**
 * Sends one prepared request over keep-alive connections, as many at once as the agent
 * allows. A reply other than 2xx, a connection error or a timeout rejects.
 */
export class HttpSender {
  private readonly agent: http.Agent;
  private readonly timeoutMs: number;

  constructor(
    private readonly base: URL,
    private readonly request: PreparedRequest,
    options: { maxSockets: number; timeoutMs: number },
  ) {
    this.agent = new http.Agent({
      keepAlive: true,
      maxSockets: options.maxSockets,
      timeout: options.timeoutMs,
    });
    this.timeoutMs = options.timeoutMs;
  }

  send = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const req = http.request(
        new URL(this.request.path, this.base),
        {
          method: 'POST',
          agent: this.agent,
          headers: {
            ...this.request.headers,
            'content-length': String(this.request.body.byteLength),
          },
          timeout: this.timeoutMs,
        },
        (res) => {
          const status = res.statusCode ?? 0;
          const kept: Buffer[] = [];
          let keptBytes = 0;
          res.on('data', (chunk: Buffer) => {
            if (status >= 300 && keptBytes < ERROR_BODY_BYTES) {
              kept.push(chunk);
              keptBytes += chunk.byteLength;
            }
          });
          res.on('end', () => {
            if (status >= 200 && status < 300) resolve();
            else
              reject(
                new Error(
                  `HTTP ${status} from ${this.request.path}: ${Buffer.concat(kept).toString('utf8', 0, ERROR_BODY_BYTES).trim()}`,
                ),
              );
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${this.timeoutMs} ms`)));
      req.on('error', reject);
      req.end(this.request.body);
    });

  close(): void {
    this.agent.destroy();
  }
}

/** GETs a URL and returns its body as text; fails with a clear message when unreachable. */
export function getText(
  url: URL,
  timeoutMs = 10_000,
  maxBytes = 64 * 1024 * 1024,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.byteLength;
        if (bytes > maxBytes)
          req.destroy(new Error(`${url.href} answered more than ${maxBytes} bytes`));
        else chunks.push(chunk);
      });
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (error) =>
      reject(
        new KilnError(KilnErrorCode.InvalidInput, `cannot reach ${url.href}: ${error.message}`, {
          details: { hint: 'is the server running? start one with `kiln serve -m <model>`' },
        }),
      ),
    );
  });
}
