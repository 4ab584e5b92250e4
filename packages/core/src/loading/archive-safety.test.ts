import { access, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { strToU8, zipSync, type Zippable } from 'fflate';
import { Header, type HeaderData } from 'tar';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { resolveModelSource, type ResolveModelSourceOptions } from './model-source.js';

interface RawTarEntry {
  path: string;
  type?: HeaderData['type'];
  body?: Uint8Array;
  linkpath?: string;
}

/** Writes tar blocks by hand, so entries can be what no well-behaved packer writes. */
function rawTar(entries: RawTarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const entry of entries) {
    const body = Buffer.from(entry.body ?? new Uint8Array());
    const block = Buffer.alloc(512);
    new Header({
      path: entry.path,
      type: entry.type ?? 'File',
      size: body.length,
      mode: 0o644,
      mtime: new Date(0),
      linkpath: entry.linkpath,
    }).encode(block, 0);
    blocks.push(block, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return Buffer.concat(blocks);
}

/** Rewrites the uncompressed size a zip declares for one entry, in both of its headers. */
function lieAboutSize(zip: Uint8Array, name: string, declared: number): Uint8Array {
  const out = Buffer.from(zip);
  const target = Buffer.from(name);
  let patched = 0;
  for (let at = 0; at + 46 <= out.length; at += 1) {
    const signature = out.readUInt32LE(at);
    // Local file header: name length at 26, name at 30, uncompressed size at 22.
    if (
      signature === 0x04034b50 &&
      out.subarray(at + 30, at + 30 + out.readUInt16LE(at + 26)).equals(target)
    ) {
      out.writeUInt32LE(declared, at + 22);
      patched += 1;
    }
    // Central directory header: name length at 28, name at 46, uncompressed size at 24.
    if (
      signature === 0x02014b50 &&
      out.subarray(at + 46, at + 46 + out.readUInt16LE(at + 28)).equals(target)
    ) {
      out.writeUInt32LE(declared, at + 24);
      patched += 1;
    }
  }
  expect(patched).toBe(2);
  return out;
}

const symlinkAttrs = { os: 3, attrs: (0o120777 << 16) >>> 0 };
const fifoAttrs = { os: 3, attrs: (0o010644 << 16) >>> 0 };

describe('hostile archives', () => {
  let work: string;
  let cacheDir: string;
  beforeEach(async () => {
    work = await mkdtemp(path.join(os.tmpdir(), 'kiln-hostile-'));
    cacheDir = path.join(work, 'cache');
  });
  afterEach(async () => {
    await rm(work, { recursive: true, force: true });
  });

  async function exists(file: string): Promise<boolean> {
    return access(file).then(
      () => true,
      () => false,
    );
  }

  /** Resolves the archive, expects the code, and checks that nothing was left anywhere. */
  async function expectRefused(
    name: string,
    bytes: Uint8Array,
    code: string,
    options: ResolveModelSourceOptions = {},
  ): Promise<void> {
    const archive = path.join(work, name);
    await writeFile(archive, bytes);
    await expect(resolveModelSource(archive, { cacheDir, ...options })).rejects.toMatchObject({
      code,
      message: expect.stringContaining(archive) as unknown,
    });
    expect(await readdir(cacheDir)).toEqual([]);
    for (const escaped of ['evil.txt', 'cache/evil.txt', 'abs-evil.txt']) {
      expect(await exists(path.join(work, escaped))).toBe(false);
    }
  }

  // Each hostile entry comes after a harmless one, so refusing must also undo real writes.
  const ok = { 'ok.txt': strToU8('fine') };

  describe('zip', () => {
    it.each([
      ['a ../ escape', '../evil.txt'],
      ['a deeper ../ escape', 'sub/../../../evil.txt'],
      ['an absolute path', '/ABS/abs-evil.txt'],
      ['a drive letter', 'C:\\evil.txt'],
    ])('refuses %s with ARCHIVE_UNSAFE', async (_what, name) => {
      const entryName = name.replace('/ABS', work);
      await expectRefused(
        'evil.zip',
        zipSync({ ...ok, [entryName]: strToU8('owned') } as Zippable),
        KilnErrorCode.ArchiveUnsafe,
      );
    });

    it('refuses a symlink to /etc with ARCHIVE_UNSAFE', async () => {
      const zip = zipSync({ ...ok, etc: [strToU8('/etc'), symlinkAttrs] });
      await expectRefused('link.zip', zip, KilnErrorCode.ArchiveUnsafe);
    });

    it('refuses a fifo entry with ARCHIVE_UNSAFE', async () => {
      const zip = zipSync({ ...ok, pipe: [strToU8(''), fifoAttrs] });
      await expectRefused('fifo.zip', zip, KilnErrorCode.ArchiveUnsafe);
    });

    it('refuses two entries that land on the same file with ARCHIVE_UNSAFE', async () => {
      const zip = zipSync({ 'a.txt': strToU8('first'), './a.txt': strToU8('second') });
      await expectRefused('twice.zip', zip, KilnErrorCode.ArchiveUnsafe);
    });

    it('refuses a zip bomb past maxArchiveBytes with ARCHIVE_TOO_LARGE', async () => {
      const zip = zipSync({ ...ok, 'zeros.bin': new Uint8Array(2 << 20) }, { level: 9 });
      expect(zip.length).toBeLessThan(16 << 10);
      await expectRefused('bomb.zip', zip, KilnErrorCode.ArchiveTooLarge, {
        maxArchiveBytes: 256 << 10,
      });
    });

    it('counts streamed bytes when the central directory understates sizes', async () => {
      const honest = zipSync({ ...ok, 'zeros.bin': new Uint8Array(2 << 20) }, { level: 9 });
      const liar = lieAboutSize(honest, 'zeros.bin', 10);
      await expectRefused('liar.zip', liar, KilnErrorCode.ArchiveTooLarge, {
        maxArchiveBytes: 256 << 10,
      });
    });

    it.each([
      ['deflated', 9],
      ['stored', 0],
    ] as const)(
      'refuses a %s entry whose data differs from its declared size with ARCHIVE_UNSAFE',
      async (_kind, level) => {
        const honest = zipSync({ ...ok, 'data.bin': new Uint8Array(100).fill(7) }, { level });
        await expectRefused(
          'mismatch.zip',
          lieAboutSize(honest, 'data.bin', 10),
          KilnErrorCode.ArchiveUnsafe,
        );
        await rm(path.join(work, 'mismatch.zip'));
        await expectRefused(
          'over.zip',
          lieAboutSize(honest, 'data.bin', 500),
          KilnErrorCode.ArchiveUnsafe,
        );
      },
    );

    it('refuses more entries than maxArchiveEntries with ARCHIVE_TOO_LARGE', async () => {
      const files = Object.fromEntries(
        Array.from({ length: 12 }, (_, i) => [`f${i}.txt`, strToU8(String(i))]),
      );
      await expectRefused('many.zip', zipSync(files), KilnErrorCode.ArchiveTooLarge, {
        maxArchiveEntries: 10,
      });
      const source = await resolveModelSource(path.join(work, 'many.zip'), {
        cacheDir,
        maxArchiveEntries: 12,
      });
      expect(source.files).toHaveLength(12);
    });
  });

  describe('tar', () => {
    const fine = { path: 'ok.txt', body: strToU8('fine') };

    it.each([
      ['a ../ escape', { path: '../evil.txt', body: strToU8('owned') }],
      ['a normalised ../ escape', { path: 'a/b/../../../evil.txt', body: strToU8('owned') }],
      ['an absolute path', { path: '/ABS/abs-evil.txt', body: strToU8('owned') }],
      ['a symlink to /etc', { path: 'etc', type: 'SymbolicLink', linkpath: '/etc' }],
      ['a relative symlink', { path: 'up', type: 'SymbolicLink', linkpath: '..' }],
      ['a hard link', { path: 'hard.txt', type: 'Link', linkpath: 'ok.txt' }],
      ['a character device', { path: 'null', type: 'CharacterDevice' }],
      ['a block device', { path: 'disk', type: 'BlockDevice' }],
      ['a fifo', { path: 'pipe', type: 'FIFO' }],
      [
        'an entry type the parser skips',
        { path: 'sparse', type: 'SparseFile', body: strToU8('x') },
      ],
    ] as [string, RawTarEntry][])('refuses %s with ARCHIVE_UNSAFE', async (_what, entry) => {
      const hostile = { ...entry, path: entry.path.replace('/ABS', work) };
      const bytes = rawTar([fine, hostile]);
      await expectRefused('evil.tar', bytes, KilnErrorCode.ArchiveUnsafe);
      await expectRefused('evil.tar.gz', gzipSync(bytes), KilnErrorCode.ArchiveUnsafe);
    });

    it('refuses a gzip bomb past maxArchiveBytes with ARCHIVE_TOO_LARGE', async () => {
      const tgz = gzipSync(rawTar([fine, { path: 'zeros.bin', body: new Uint8Array(4 << 20) }]));
      expect(tgz.length).toBeLessThan(16 << 10);
      await expectRefused('bomb.tgz', tgz, KilnErrorCode.ArchiveTooLarge, {
        maxArchiveBytes: 256 << 10,
      });
    });

    it('refuses more entries than maxArchiveEntries with ARCHIVE_TOO_LARGE', async () => {
      const entries = Array.from({ length: 12 }, (_, i) => ({
        path: `f${i}.txt`,
        body: strToU8(String(i)),
      }));
      await expectRefused('many.tar', rawTar(entries), KilnErrorCode.ArchiveTooLarge, {
        maxArchiveEntries: 10,
      });
    });

    it('refuses a truncated archive with INVALID_INPUT', async () => {
      const bytes = rawTar([fine, { path: 'big.bin', body: new Uint8Array(4096).fill(1) }]);
      await expectRefused('cut.tar', bytes.subarray(0, 1536), KilnErrorCode.InvalidInput);
    });

    it('accepts a hand-written archive with folders and normalised names', async () => {
      const bytes = rawTar([
        { path: 'model/', type: 'Directory' },
        { path: 'model/./weights/../model.bin', body: strToU8('weights') },
        fine,
      ]);
      const archive = path.join(work, 'good.tar');
      await writeFile(archive, bytes);
      const source = await resolveModelSource(archive, { cacheDir });
      expect(source.files).toEqual(['model/model.bin', 'ok.txt']);
    });
  });
});
