import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode, type ServingInput } from '@kiln/core';
import { ServerMetrics } from '../metrics/server-metrics.js';
import type { ServerContext } from '../routes/server-context.js';
import { hostPolicy } from '../security/host-origin.js';
import { fastPredictions } from './fast-predictions.js';

// Which requests the fast path takes and which it leaves to Koa (a stand-in here that answers
// "koa"); test/http/fast-predictions.test.ts checks that both answer alike in a real server.

const toKoa: string[] = [];
const server = {
  config: {
    accessLog: false,
    maxRequestSize: 1024,
    requestTimeoutMs: 5000,
    clientBodyTimeoutMs: 5000,
  },
  accepting: true,
  metrics: new ServerMetrics(),
  log: pino({ level: 'silent' }),
  models: {
    has: (name: string) => name === 'echo' || name === 'loading',
    get(name: string, version?: string) {
      if ((name === 'echo' || name === 'loading') && version === undefined)
        return { kind: 'forward' };
      if (name === 'writer') return { kind: 'step' };
      throw new Error(`model ${name} not found`);
    },
    servingPool(name: string) {
      if (name === 'loading')
        throw new KilnError(KilnErrorCode.ModelNotReady, 'model loading is still loading');
      return {};
    },
    submit: (_name: string, _version: string | undefined, input: ServingInput) => ({
      result: Promise.resolve({
        type: 'json' as const,
        value: { echoed: Buffer.from(input.body!).toString() },
      }),
      cancel() {},
    }),
  },
} as unknown as ServerContext & { accepting: boolean };

let base: string;
let listener: http.Server;

beforeAll(async () => {
  const koa: http.RequestListener = (req, res) => {
    toKoa.push(`${req.method} ${req.url}`);
    res.end('koa');
  };
  const hosts = hostPolicy('127.0.0.1', [], []);
  listener = http.createServer(
    fastPredictions({ server, hosts, errors: { overloadStatus: 503, retryAfterS: 1 } }, koa),
  );
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
});

afterAll(() => new Promise((resolve) => listener.close(resolve)));

function send(
  route: string,
  options: { method?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; type: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      `${base}${route}`,
      { method: options.method ?? 'POST', headers: options.headers ?? {} },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode!, type: response.headers['content-type'], body }),
        );
      },
    );
    request.on('error', reject);
    request.end(options.method === 'GET' ? undefined : 'hello');
  });
}

describe('fastPredictions', () => {
  it('answers a prediction for a registered model itself, as Koa would spell it', async () => {
    toKoa.length = 0;
    const answer = await send('/predictions/echo');
    expect(answer).toEqual({
      status: 200,
      type: 'application/json; charset=utf-8',
      body: '{"echoed":"hello"}',
    });
    expect(toKoa).toEqual([]);
  });

  it('refuses a model that is not ready before reading the body', async () => {
    // 1000 bytes declared (within the limit), 5 sent: the answer comes while the rest is owed.
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = http.request(`${base}/predictions/loading`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-npy', 'content-length': '1000' },
      });
      request.on('response', (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => {
          resolve({ status: response.statusCode!, body });
          request.destroy();
        });
      });
      request.on('error', reject);
      request.write('hello');
    });
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 503, type: 'ModelNotReady' });
  });

  it('leaves everything else to Koa', async () => {
    toKoa.length = 0;
    await send('/predictions/echo', { method: 'GET' });
    await send('/predictions/echo?x=1');
    await send('/predictions/echo/');
    await send('/predictions/echo/2'); // no such version: Koa answers the 404
    await send('/predictions/nobody');
    await send('/predictions/writer'); // text generation has its own route
    await send('/predictions/ech%6F');
    await send('/invocations');
    await send('/predictions/echo', { headers: { host: 'evil.example' } });
    await send('/predictions/echo', { headers: { origin: 'https://evil.example' } });
    server.accepting = false;
    try {
      await send('/predictions/echo');
    } finally {
      server.accepting = true;
    }
    expect(toKoa).toEqual([
      'GET /predictions/echo',
      'POST /predictions/echo?x=1',
      'POST /predictions/echo/',
      'POST /predictions/echo/2',
      'POST /predictions/nobody',
      'POST /predictions/writer',
      'POST /predictions/ech%6F',
      'POST /invocations',
      'POST /predictions/echo',
      'POST /predictions/echo',
      'POST /predictions/echo',
    ]);
  });
});
