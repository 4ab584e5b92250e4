import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadOrt } from '@kiln/engine-onnxruntime';
import { tinyModel } from '@kiln/model-tools';
import { checkEngine } from '@kiln/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runBench } from './bench-program.js';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return {
    io: {
      stdout: { write: (s: string) => out.push(s) },
      stderr: { write: (s: string) => err.push(s) },
    },
    out: () => out.join(''),
    err: () => err.join(''),
  };
}

describe('kiln-bench command line', () => {
  it('prints help with examples and exits 0', async () => {
    const c = capture();
    expect(await runBench(['--help'], c.io)).toBe(0);
    expect(c.out()).toMatch(/Usage: kiln-bench/);
    expect(c.out()).toMatch(/Examples:[\s\S]*--concurrency 1:64:x2/);
  });

  it.each([
    [[], /nothing to benchmark/],
    [['-u', 'm', '--server', 'http://x'], /not both/],
    [['-u', 'm', '-s', '(1,2)q'], /unknown dtype suffix "q"/],
    [['-u', 'm', '-c', '0'], /-c "0" must be a whole number from 1/],
    [['-u', 'm', '-d', 'soon'], /bad duration/],
    [['--server', 'http://127.0.0.1:1'], /needs the model name/],
    [
      ['--server', 'http://127.0.0.1:1', '-n', 'm', '--concurrency', '8:1'],
      /end is below the start/,
    ],
    [['-u', 'm', '--rate', '10'], /--rate measures a running server/],
    [['-u', 'm', '--bogus'], /unknown option '--bogus'/],
    [['-u', 'm', '--protocol', 'grpc'], /Allowed choices are predictions, v2, v2-binary/],
  ])('exits 2 with one clear line for %j', async (argv, message) => {
    const c = capture();
    expect(await runBench(argv, c.io)).toBe(2);
    expect(c.err()).toMatch(message);
    expect(c.err()).not.toMatch(/\n\s+at /);
  });

  it('exits 1 for a missing input file and a missing model, without a stack trace', async () => {
    let c = capture();
    expect(await runBench(['-u', 'm', '-i', '/nonexistent/input.npy'], c.io)).toBe(1);
    expect(c.err()).toMatch(/^error: cannot read input \/nonexistent\/input.npy/);
    c = capture();
    expect(await runBench(['-u', '/nonexistent/model', '-s', '1,4'], c.io)).toBe(1);
    expect(c.err()).toMatch(/^error: no model at \/nonexistent\/model/);
    expect(c.err()).toMatch(/hint: /);
    expect(c.err()).not.toMatch(/\n\s+at /);
  });
});

const { run } = await checkEngine('OnnxRuntime', async () => {
  await loadOrt();
  return null;
});

describe.skipIf(!run)('kiln-bench outputs', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kiln-bench-cli-'));
    await tinyModel(path.join(dir, 'tiny'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('prints JSON on stdout with --json and writes CSV and HTML files', async () => {
    const c = capture();
    const csv = path.join(dir, 'out', 'result.csv');
    const html = path.join(dir, 'out', 'result.html');
    const code = await runBench(
      [
        '-u',
        path.join(dir, 'tiny'),
        '-s',
        '(1,4)f',
        '-c',
        '20',
        '-w',
        '2',
        '--json',
        '--csv',
        csv,
        '--html',
        html,
      ],
      c.io,
    );
    expect(c.err()).toContain(`wrote ${csv}`);
    expect(code).toBe(0);
    const result = JSON.parse(c.out()) as {
      kind: string;
      iterations: number;
      latency: { total: { count: number } };
    };
    expect(result).toMatchObject({
      kind: 'in-process',
      iterations: 20,
      latency: { total: { count: 20 } },
    });
    const rows = (await readFile(csv, 'utf8')).trim().split('\n');
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(/^model,engine,workers,/);
    expect(rows[1]).toMatch(/^tiny,OnnxRuntime,1,/);
    expect(await readFile(html, 'utf8')).toMatch(/<svg[\s\S]*class="bar"/);
  });

  it('prints the table by default', async () => {
    const c = capture();
    expect(
      await runBench(['-u', path.join(dir, 'tiny'), '-s', '1,4', '-c', '10', '-w', '0'], c.io),
    ).toBe(0);
    expect(c.out()).toMatch(/model load\s+[\d.]+ ms/);
    expect(c.out()).toMatch(/throughput\s+[\d.]+ req\/s \(10 requests/);
    expect(c.out()).toMatch(/^\s+total\s+[\d.]+/m);
  });
});
