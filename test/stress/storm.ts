import net from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { type HostileCase, type Target, hostileArbitrary, validRequest } from './hostile-cases.js';
import type { ServerProcess } from './server-process.js';

export interface StormOptions {
  readonly requests: number;
  readonly concurrency: number;
  readonly seed: number;
  /** A valid request is checked after every this many hostile ones. */
  readonly checkEvery: number;
  /** An answer slower than this is a hang. */
  readonly hangMs: number;
  /** Hostile requests sent before the RSS baseline is taken. */
  readonly warmup: number;
  readonly onProgress?: (report: StormReport) => void;
}

export interface StormReport {
  requests: number;
  crashes: number;
  hangs: number;
  unexpected5xx: number;
  nonJson: number;
  validChecks: number;
  validWrong: number;
  /** The same as validWrong, under the name every listener's tally uses. */
  innocentFailures: number;
  rssBefore: number;
  rssAfter: number;
  rssPeak: number;
  byStatus: Record<string, number>;
  /** The slowest answers (a few), to find what keeps the server busy. */
  slowest: { kind: string; status: number; ms: number }[];
  /** A few offending cases, for the report. */
  samples: { problem: string; kind: string; status: number; request: string; answer: string }[];
  seconds: number;
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
  ms: number;
  refused: boolean;
}

/** Sends bytes on a fresh connection and reads the whole answer (the server closes it). */
export function send(base: string, bytes: Buffer, hangMs: number): Promise<Answer> {
  const { hostname, port } = new URL(base);
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let refused = false;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...parse(Buffer.concat(chunks)), ms: performance.now() - started, refused });
    };
    const timer = setTimeout(finish, hangMs);
    socket.on('connect', () => socket.write(bytes, () => undefined));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      const answer = parse(Buffer.concat(chunks));
      const length = Number(answer.headers['content-length'] ?? Number.NaN);
      if (answer.status !== 0 && Buffer.byteLength(answer.body) >= length) finish();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'ECONNREFUSED') refused = true;
      finish();
    });
    socket.on('close', finish);
  });
}

function parse(bytes: Buffer): { status: number; headers: Record<string, string>; body: string } {
  const split = bytes.indexOf('\r\n\r\n');
  if (split < 0) return { status: 0, headers: {}, body: '' };
  const [statusLine = '', ...lines] = bytes.subarray(0, split).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0)
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return {
    status: Number(statusLine.split(' ')[1] ?? 0),
    headers,
    body: bytes.subarray(split + 4).toString('utf8'),
  };
}

/**
 * 503 (overload, not ready) and 501 (a method HTTP does not define here) are honest answers;
 * any other 5xx is a defect.
 */
export function unexpected5xx(status: number): boolean {
  return status >= 500 && status !== 503 && status !== 501;
}

const SETTLE_MS = 2000;

function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
}

export function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Sends `requests` generated hostile requests (fast-check, reproducible from `seed`) at a
 * running server, `concurrency` at a time, and checks a valid request between them.
 */
export async function runStorm(
  server: ServerProcess,
  target: Target,
  options: StormOptions,
): Promise<StormReport> {
  const valid = validRequest(target);
  const base = {
    inference: server.inference,
    management: server.management,
    metrics: server.metrics,
  };
  const report: StormReport = {
    requests: 0,
    crashes: 0,
    hangs: 0,
    unexpected5xx: 0,
    nonJson: 0,
    validChecks: 0,
    validWrong: 0,
    innocentFailures: 0,
    rssBefore: 0,
    rssAfter: 0,
    rssPeak: 0,
    byStatus: {},
    slowest: [],
    samples: [],
    seconds: 0,
  };
  const note = (problem: string, c: HostileCase, answer: Answer) => {
    if (report.samples.filter((s) => s.problem === problem).length < 8)
      report.samples.push({
        problem,
        kind: c.kind,
        status: answer.status,
        request: c.bytes.subarray(0, 300).toString('latin1'),
        answer: answer.body.slice(0, 300),
      });
  };
  const checkValid = async () => {
    const answer = await send(server.inference, valid.bytes, options.hangMs);
    report.validChecks++;
    let right = answer.status === 200;
    try {
      right &&= isDeepStrictEqual(JSON.parse(answer.body), valid.expected);
    } catch {
      right = false;
    }
    if (!right) {
      report.validWrong++;
      report.innocentFailures++;
      note(
        'valid request answered wrongly',
        { kind: 'valid', listener: 'inference', bytes: valid.bytes },
        answer,
      );
    }
  };

  // Warm up (every model and decoder once, workers and arenas at their working size), then
  // take the baseline: growth after it is what the storm costs.
  const arbitrary = hostileArbitrary(target);
  const warmupCases = fc.sample(arbitrary, { numRuns: options.warmup, seed: -options.seed });
  await Promise.all(
    Array.from({ length: options.concurrency }, async () => {
      for (let c = warmupCases.pop(); c; c = warmupCases.pop())
        await send(base[c.listener], c.bytes, options.hangMs);
    }),
  );
  for (let i = 0; i < 20; i++) await checkValid();
  report.validChecks = 0;
  report.validWrong = 0;
  report.innocentFailures = 0;
  report.samples = [];
  // Both readings are taken after the same quiet spell, so that they compare like with like.
  await settle();
  report.rssBefore = server.rss();
  report.rssPeak = report.rssBefore;
  const started = performance.now();
  const batch = options.checkEvery;
  let sent = 0;
  let seed = options.seed;
  while (sent < options.requests && server.alive()) {
    const cases = fc.sample(arbitrary, {
      numRuns: Math.min(batch, options.requests - sent),
      seed: seed++,
    });
    let next = 0;
    const lane = async () => {
      while (next < cases.length && server.alive()) {
        const c = cases[next++]!;
        const answer = await send(base[c.listener], c.bytes, options.hangMs);
        report.requests++;
        report.byStatus[answer.status] = (report.byStatus[answer.status] ?? 0) + 1;
        // A 408 is the server waiting out a slow client, not working.
        if (answer.status !== 408)
          noteSlow(report.slowest, {
            kind: c.kind,
            status: answer.status,
            ms: Math.round(answer.ms),
          });
        if (answer.refused || !server.alive()) {
          report.crashes++;
          note('server gone', c, answer);
        } else if (answer.ms >= options.hangMs) {
          report.hangs++;
          note('hang', c, answer);
        } else if (unexpected5xx(answer.status)) {
          report.unexpected5xx++;
          note('unexpected 5xx', c, answer);
        } else if (
          answer.status === 0 ||
          (answer.status >= 400 && !c.bodyless && !isJson(answer.body))
        ) {
          report.nonJson++;
          note('not a JSON answer', c, answer);
        }
      }
    };
    await Promise.all(Array.from({ length: options.concurrency }, lane));
    sent += cases.length;
    if (server.alive()) await checkValid();
    report.rssPeak = Math.max(report.rssPeak, server.alive() ? server.rss() : 0);
    report.seconds = (performance.now() - started) / 1000;
    options.onProgress?.(report);
  }
  if (!server.alive()) report.crashes = Math.max(report.crashes, 1);
  else {
    await settle();
    report.rssAfter = server.rss();
  }
  report.seconds = (performance.now() - started) / 1000;
  return report;
}

/** Keeps the five slowest answers, slowest first. */
function noteSlow(slowest: StormReport['slowest'], answer: StormReport['slowest'][number]): void {
  if (slowest.length === 5 && answer.ms <= slowest[4]!.ms) return;
  slowest.push(answer);
  slowest.sort((a, b) => b.ms - a.ms);
  slowest.length = Math.min(slowest.length, 5);
}

/** Whether a storm met the bars of issue #12. */
export function stormPassed(report: StormReport, maxRssGrowth = 64 * 1024 * 1024): boolean {
  return (
    report.crashes === 0 &&
    report.hangs === 0 &&
    report.unexpected5xx === 0 &&
    report.nonJson === 0 &&
    report.validWrong === 0 &&
    report.rssAfter - report.rssBefore <= maxRssGrowth
  );
}
