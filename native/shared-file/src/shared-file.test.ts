import {
  closeSync,
  mkdtempSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { collectGarbage } from '@kiln/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { addonCandidates, loadAddonFrom, loadSharedFileAddon } from './index.js';

const load = loadSharedFileAddon();
const dir = mkdtempSync(join(tmpdir(), 'kiln-shared-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, bytes: Uint8Array): string {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
}

const pattern = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 7) % 251);

describe.skipIf(load.problem !== undefined)('kiln_shared_file', () => {
  const addon = load.addon!;

  it('maps a file and hands the same mapping to later callers under the key', () => {
    const path = file('weights.bin', pattern(10_000));
    const first = addon.share('weights', path);
    expect(new Uint8Array(first)).toEqual(pattern(10_000));
    const again = addon.find('weights');
    expect(again?.byteLength).toBe(10_000);
    expect(new Uint8Array(again!)).toEqual(pattern(10_000));
    // A second share of the key keeps the first mapping, whatever file it names.
    const other = file('other.bin', pattern(3));
    expect(addon.share('weights', other).byteLength).toBe(10_000);
    expect(addon.stats()).toEqual({ mappings: 1, bytes: 10_000 });
    expect(addon.find('no such key')).toBeUndefined();
  });

  it('keeps the mapping after the file is removed, and unmaps once no buffer holds it', async () => {
    const path = file('gone.bin', pattern(4096));
    let held: ArrayBuffer | undefined = addon.share('gone', path);
    unlinkSync(path);
    expect(new Uint8Array(addon.find('gone')!)).toEqual(pattern(4096));
    expect(new Uint8Array(held)[4095]).toBe(pattern(4096)[4095]);
    held = undefined;
    await collectGarbage();
    expect(addon.find('gone')).toBeUndefined();
    expect(addon.stats().mappings).toBe(0);
  });

  it('gives worker threads the mapping the main thread holds, one copy in the process', async () => {
    const path = file('threads.bin', pattern(65_536));
    const held = addon.share('threads', path);
    const source = `
      const { parentPort, workerData } = require('node:worker_threads');
      const addon = require(workerData.addonPath);
      const before = addon.stats();
      const buffer = addon.find('threads');
      const bytes = new Uint8Array(buffer);
      let sum = 0;
      for (const b of bytes) sum += b;
      parentPort.postMessage({ length: buffer.byteLength, sum, added: addon.stats().mappings - before.mappings });
    `;
    const addonPath = addonCandidates().find((c) => c.source === 'package build')!.path;
    const answers = await Promise.all(
      [0, 1, 2].map(
        () =>
          new Promise<{ length: number; sum: number; added: number }>((resolve, reject) => {
            const worker = new Worker(source, { eval: true, workerData: { addonPath } });
            worker.once('message', resolve);
            worker.once('error', reject);
          }),
      ),
    );
    const sum = pattern(65_536).reduce((a, b) => a + b, 0);
    for (const answer of answers) {
      expect(answer).toEqual({ length: 65_536, sum, added: 0 });
    }
    expect(held.byteLength).toBe(65_536);
  });

  it('lets one thread make the file, tells the others to wait, and remembers a failure', () => {
    expect(addon.claim('made')).toBe('claimed');
    expect(addon.claim('made')).toBe('busy');
    const held = addon.share('made', file('made.bin', pattern(8)));
    addon.unclaim('made');
    expect(addon.claim('made')).toBe('busy'); // the mapping is alive: find it
    expect(held.byteLength).toBe(8);

    expect(addon.claim('broken')).toBe('claimed');
    addon.unclaim('broken', 'the model cannot be saved');
    expect(addon.claim('broken')).toBe('failed: the model cannot be saved');

    expect(addon.claim('given back')).toBe('claimed');
    addon.unclaim('given back');
    expect(addon.claim('given back')).toBe('claimed');
    addon.unclaim('given back');
  });

  it('gives back the claims of a worker thread that ends', async () => {
    const addonPath = addonCandidates().find((c) => c.source === 'package build')!.path;
    const source = `
      const { parentPort, workerData } = require('node:worker_threads');
      const addon = require(workerData.addonPath);
      parentPort.postMessage(addon.claim('abandoned'));
      setInterval(() => {}, 1000);
    `;
    const worker = new Worker(source, { eval: true, workerData: { addonPath } });
    const answer = await new Promise((resolve) => worker.once('message', resolve));
    expect(answer).toBe('claimed');
    expect(addon.claim('abandoned')).toBe('busy');
    await worker.terminate();
    expect(addon.claim('abandoned')).toBe('claimed');
    addon.unclaim('abandoned');
  });

  it('maps an open file writable, shared with whoever else maps it', () => {
    const path = file('exchange.bin', new Uint8Array(8192));
    const fd = openSync(path, 'r+');
    const region = new Uint8Array(addon.mapWritable(fd, 8192));
    closeSync(fd);
    region.set(pattern(100), 4000);
    // What another process reading the file sees: the bytes just written, no flush needed.
    expect(new Uint8Array(readFileSync(path)).subarray(4000, 4100)).toEqual(pattern(100));
    expect(() => addon.mapWritable(987_654, 4096)).toThrow(
      expect.objectContaining({ code: 'MODEL_LOAD_FAILED' }),
    );
    expect(() => addon.mapWritable(0, 0)).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
  });

  it('refuses what cannot be mapped with a coded error naming the path', () => {
    const missing = join(dir, 'missing.bin');
    expect(() => addon.share('missing', missing)).toThrow(
      expect.objectContaining({
        code: 'MODEL_LOAD_FAILED',
        message: expect.stringContaining(missing),
      }),
    );
    const empty = file('empty.bin', new Uint8Array());
    expect(() => addon.share('empty', empty)).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
    mkdirSync(join(dir, 'folder'));
    expect(() => addon.share('folder', join(dir, 'folder'))).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
    expect(() => addon.share('', file('k.bin', pattern(1)))).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
    expect(() => (addon.share as unknown as (key: unknown) => void)(42)).toThrow(
      expect.objectContaining({ code: 'INVALID_INPUT' }),
    );
    expect(addon.find('missing')).toBeUndefined();
  });
});

describe('loading the addon', () => {
  it('says where it looked and how to fix it when nothing loads', () => {
    const result = loadAddonFrom([{ path: join(dir, 'nope.node'), source: 'test' }]);
    expect(result.addon).toBeUndefined();
    expect(result.problem).toContain('nope.node (test): not found');
    expect(result.problem).toContain('npm rebuild @kiln/shared-file-native');
  });

  it('loads here, where the build tools are installed', () => {
    if (load.problem !== undefined && !process.env.CI) {
      console.log(`skipped: ${load.problem}`);
      return;
    }
    expect(load.problem).toBeUndefined();
  });
});
