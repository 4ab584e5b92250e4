import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KilnError, KilnErrorCode } from '../errors.js';
import { archiveEntryPath } from './archive-entry-path.js';

describe('archiveEntryPath', () => {
  it.each([
    ['model.onnx', 'model.onnx'],
    ['resnet/model.onnx', 'resnet/model.onnx'],
    ['resnet/', 'resnet'],
    ['./resnet//model.onnx', 'resnet/model.onnx'],
    ['a/../b.txt', 'b.txt'],
    ['a\\b\\c.txt', 'a/b/c.txt'],
    ['..foo/bar', '..foo/bar'],
  ])('keeps %j as %j', (name, expected) => {
    expect(archiveEntryPath(name)).toBe(expected);
  });

  it.each(['./', '.', 'a/..'])('maps %j to the root', (name) => {
    expect(archiveEntryPath(name)).toBeUndefined();
  });

  it.each([
    ['../evil.txt', 'escapes'],
    ['a/../../evil.txt', 'escapes'],
    ['..', 'escapes'],
    ['..\\evil.txt', 'escapes'],
    ['/etc/passwd', 'absolute'],
    ['\\\\server\\share\\x', 'absolute'],
    ['C:\\Windows\\evil.dll', 'drive'],
    ['c:evil', 'drive'],
    ['a\0b', 'NUL'],
    [`${'d/'.repeat(40)}f`, 'deeper'],
  ])('refuses %j (%s) with ARCHIVE_UNSAFE', (name, why) => {
    let caught: unknown;
    try {
      archiveEntryPath(name);
    } catch (error) {
      caught = error;
    }
    expect(KilnError.is(caught, KilnErrorCode.ArchiveUnsafe)).toBe(true);
    expect((caught as Error).message).toContain(why);
  });

  it('never returns a path that leaves the extraction folder', () => {
    const root = '/extract/root';
    const segment = fc.constantFrom('..', '.', 'a', 'b', '', 'C:', '\\', '..\\..', '/');
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 8 }), (segments) => {
        let relative: string | undefined;
        try {
          relative = archiveEntryPath(segments.join('/'));
        } catch (error) {
          return KilnError.is(error, KilnErrorCode.ArchiveUnsafe);
        }
        if (relative === undefined) return true;
        const resolved = path.resolve(root, relative);
        return resolved.startsWith(`${root}/`) && !relative.includes('\\');
      }),
      { numRuns: 2000 },
    );
  });
});
