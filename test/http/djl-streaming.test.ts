import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkEngine } from '@kiln/testing';
import { type TestServer, sleep, startTestServer, tempDir } from '../support/server-harness.js';

// A handler streaming its answer with djl_python's Output.add_stream_content, served unchanged
// over real HTTP: chunks reach the client while it runs, and a client that leaves stops it.
const PYTHON = '/usr/bin/python3';
const { run } = await checkEngine('Python', () => {
  try {
    execFileSync(PYTHON, ['-c', 'import numpy'], { stdio: 'ignore' });
    return Promise.resolve(null);
  } catch {
    return Promise.resolve(`${PYTHON} cannot import numpy (apt-get install python3-numpy)`);
  }
});

const hasCurl = (() => {
  try {
    execFileSync('curl', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    console.warn('skipping the curl check: curl is absent');
    return false;
  }
})();

const FIXTURE = fileURLToPath(new URL('../fixtures/djl-handlers/streaming', import.meta.url));

let t: TestServer;
let root: string;

beforeAll(async () => {
  if (!run) return;
  root = tempDir('djl-streaming');
  const dir = path.join(root, 'streaming');
  fs.mkdirSync(dir);
  fs.copyFileSync(path.join(FIXTURE, 'model.py'), path.join(dir, 'model.py'));
  fs.writeFileSync(path.join(dir, 'serving.properties'), `option.pythonExecutable=${PYTHON}\n`);
  t = await startTestServer({ models: [`streaming::Python=${dir}`] });
  await t.settled();
});

afterAll(async () => {
  await t?.stop();
});

interface Progress {
  produced: number;
  closed: boolean;
}

let files = 0;
/** A fresh file the handler records its progress in. */
function progressFile(): string {
  return path.join(root, `progress-${files++}.json`);
}

function progressOf(file: string): Progress {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as Progress;
}

/** Opens a streaming request; `onData` sees each piece of the body as it arrives. */
function stream(
  route: string,
  body: Record<string, unknown>,
  onData: (text: string, req: http.ClientRequest) => void = () => undefined,
): Promise<{ res: http.IncomingMessage; text: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${t.inference}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.setEncoding('utf8');
      let all = '';
      const text = new Promise<string>((done) => {
        res.on('data', (piece: string) => {
          all += piece;
          onData(piece, req);
        });
        res.on('end', () => done(all));
        res.on('close', () => done(all));
      });
      resolve({ res, text });
    });
    req.end(JSON.stringify(body));
  });
}

const lines = (text: string) =>
  text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as unknown);

async function closedProgress(file: string): Promise<Progress> {
  for (let i = 0; i < 200; i++) {
    if (fs.existsSync(file) && progressOf(file).closed) return progressOf(file);
    await sleep(25);
  }
  throw new Error(`the handler never closed its generator (${file})`);
}

describe.skipIf(!run)('DJL streaming handlers over HTTP', () => {
  it.each([
    ['/predictions/streaming', 'the fast route'],
    ['/predictions/streaming?via=koa', 'the router'],
  ])("sends DJL's JSON lines as the handler yields them (%s, %s)", async (route) => {
    const progress = progressFile();
    let atFirstChunk: Progress | undefined;
    const { res, text } = await stream(
      route,
      { count: 4, pause: 0.25, progress },
      () => (atFirstChunk ??= progressOf(progress)),
    );
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/jsonlines');
    expect(res.headers['transfer-encoding']).toBe('chunked');
    const body = await text;
    // The first chunk came while the handler had more to produce.
    expect(atFirstChunk!.produced).toBeLessThan(4);
    expect(atFirstChunk!.closed).toBe(false);
    expect(lines(body)).toEqual([0, 1, 2, 3].map((i) => ({ outputs: [`token${i}`] })));
    expect((await closedProgress(progress)).produced).toBe(4);
  });

  it.skipIf(!hasCurl)('reaches curl chunk by chunk while the handler still runs', async () => {
    const progress = progressFile();
    const curl = spawn('curl', [
      '-sN',
      '-H',
      'content-type: application/json',
      '-d',
      JSON.stringify({ count: 4, pause: 0.25, progress }),
      `${t.inference}/predictions/streaming`,
    ]);
    // What the handler had done when each piece of curl's output arrived.
    const arrivals: { text: string; handler: Progress }[] = [];
    curl.stdout.setEncoding('utf8');
    curl.stdout.on('data', (text: string) =>
      arrivals.push({ text, handler: progressOf(progress) }),
    );
    const code = await new Promise<number | null>((resolve) => curl.on('close', resolve));
    expect(code).toBe(0);
    expect(arrivals[0]!.handler.produced).toBeLessThan(4);
    expect(arrivals[0]!.handler.closed).toBe(false);
    expect(lines(arrivals.map((a) => a.text).join(''))).toEqual(
      [0, 1, 2, 3].map((i) => ({ outputs: [`token${i}`] })),
    );
  });

  it('stops the generator within one chunk of a client that disconnects', async () => {
    const progress = progressFile();
    let received = 0;
    let receivedAtClose = 0;
    const { text } = await stream(
      '/predictions/streaming',
      { count: 100, pause: 0.1, progress },
      (piece, req) => {
        received += piece.split('\n').length - 1;
        if (received >= 3 && !req.destroyed) {
          receivedAtClose = received;
          req.destroy();
        }
      },
    );
    await text;
    const stopped = await closedProgress(progress);
    expect(receivedAtClose).toBeGreaterThanOrEqual(3);
    expect(stopped.produced).toBeLessThanOrEqual(receivedAtClose + 1);
    // The worker answers the next request.
    const next = await stream('/predictions/streaming', { count: 2 });
    expect(lines(await next.text)).toHaveLength(2);
  });

  it('holds the handler back while the client does not read', async () => {
    const progress = progressFile();
    // 64 items of 256 kB: far more than the socket and stream buffers between them hold.
    const { res, text } = await stream('/predictions/streaming', {
      count: 64,
      size: 256 * 1024,
      progress,
    });
    res.pause();
    let produced = 0;
    for (let i = 0; i < 10; i++) {
      await sleep(50);
      produced = progressOf(progress).produced;
    }
    expect(produced).toBeLessThan(64);
    expect(progressOf(progress).closed).toBe(false);
    res.resume();
    expect(lines(await text)).toHaveLength(64);
    expect((await closedProgress(progress)).produced).toBe(64);
  });

  it("sends server-sent events through the handler's own formatter and content type", async () => {
    const { res, text } = await stream('/predictions/streaming', { count: 3, sse: true });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(await text).toBe([0, 1, 2].map((i) => `data: {"text": "token${i}"}\n\n`).join(''));
  });

  it('ends the stream of a handler that raises midway with an error line; the worker goes on', async () => {
    const progress = progressFile();
    const { res, text } = await stream('/predictions/streaming', {
      count: 5,
      fail_at: 2,
      progress,
    });
    expect(res.statusCode).toBe(200);
    const [first, second, error, ...rest] = lines(await text) as Record<string, unknown>[];
    expect([first, second]).toEqual([{ outputs: ['token0'] }, { outputs: ['token1'] }]);
    expect(error).toMatchObject({ code: 500 });
    expect(error!.message).toContain('the stream broke at item 2');
    expect(JSON.stringify(error)).not.toMatch(/Traceback|File "/);
    expect(rest).toEqual([]);
    expect(await closedProgress(progress)).toEqual({ produced: 2, closed: true });
    const next = await stream('/predictions/streaming', { count: 1 });
    expect(lines(await next.text)).toEqual([{ outputs: ['token0'] }]);
  });
});
