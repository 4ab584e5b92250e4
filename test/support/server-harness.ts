import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { type Logger, pino } from 'pino';
import { type KilnServer, loadServerConfig, startKilnServer } from '@kiln/server';

export interface TestServer {
  readonly server: KilnServer;
  readonly inference: string;
  readonly management: string;
  readonly metrics: string;
  /** The management API's bearer token. */
  readonly token: string;
  /** fetch() on the management listener, with the bearer token. */
  manage(route: string, init?: RequestInit): Promise<Response>;
  /** Resolves once every registered model finished loading (either way). */
  settled(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts a real server on ephemeral loopback ports. Its management API demands a token, as
 * by default: a fresh one, given as management_token so that no key file is written.
 */
export async function startTestServer(
  options: {
    models?: string[];
    config?: Record<string, string>;
    logger?: Logger;
    /** Engine modules to serve with (default: the server's own list). */
    engineModules?: readonly string[];
  } = {},
): Promise<TestServer> {
  const token = randomBytes(16).toString('hex');
  const config = loadServerConfig({
    env: {},
    overrides: {
      management_token: token,
      inference_address: 'http://127.0.0.1:0',
      management_address: 'http://127.0.0.1:0',
      metrics_address: 'http://127.0.0.1:0',
      enable_access_log: 'false',
      ...options.config,
    },
  });
  const server = await startKilnServer({
    config,
    models: options.models ?? [],
    logger: options.logger ?? pino({ level: 'silent' }),
    ...(options.engineModules ? { engineModules: options.engineModules } : {}),
  });
  const settled = async () => {
    // Registration itself is asynchronous: wait until every startup model is registered.
    for (let i = 0; i < 200 && server.models.list().length < (options.models?.length ?? 0); i++)
      await sleep(10);
    await Promise.all(server.models.list().map((e) => e.loading));
  };
  const key = server.managementKey?.token ?? '';
  const manage = (route: string, init: RequestInit = {}) =>
    fetch(`${server.urls.management}${route}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, ...(init.headers as Record<string, string>) },
    });
  return { server, ...server.urls, token: key, manage, settled, stop: () => server.stop() };
}

/** A logger whose JSON lines are kept, parsed, in `lines` (default level: info). */
export function capturingLogger(level = 'info'): {
  logger: Logger;
  lines: Record<string, unknown>[];
} {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean))
        lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}

export function tempDir(label: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `kiln-${label}-`));
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Status and parsed JSON body of a response (body undefined when not JSON). */
export async function jsonOf(
  response: Response,
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: response.status, body, headers: response.headers };
}

/** An error body must be JSON, name the problem and carry no stack trace. */
export function expectCleanError(body: unknown): string {
  const text = JSON.stringify(body);
  if (/\bat .+\(.+:\d+:\d+\)|node:internal|\.ts:\d+/.test(text))
    throw new Error(`error body leaks a stack trace: ${text}`);
  return text;
}
