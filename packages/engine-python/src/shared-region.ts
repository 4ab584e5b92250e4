import { closeSync, existsSync, openSync, unlinkSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { loadSharedFileAddon } from '@kiln/shared-file-native';
import type { Content } from './frames.js';

/** Contents from this size on travel through shared memory; smaller ones are cheaper inline. */
export const SHARED_MIN_BYTES = 64 * 1024;
/** Each of a Python worker's two regions (calls, answers): a 224×224 float32 image is 602 kB. */
export const SHARED_REGION_BYTES = 4 * 1024 * 1024;
/** Where a content starts in the region: a multiple of this (numpy and SIMD-friendly). */
const SHARED_ALIGNMENT = 64;

/**
 * Memory one side writes large contents into and the other reads them from — a call's from
 * Node to its Python worker, an answer's back — instead of both copying them through a socket
 * in 200-odd-kB pieces with a wake-up each. One call uses a region at a time; a call finding it
 * busy, or whose contents do not fit, sends them inline as before. Backed by an unlinked file
 * in /dev/shm whose descriptor the worker inherits, so nothing is left behind however the
 * processes end.
 */
export class SharedRegion {
  private busy = false;
  /** Calls whose contents went through the region. */
  calls = 0;
  /** Answer contents read out of the region. */
  reads = 0;

  private constructor(
    private readonly region: Uint8Array,
    /** The descriptor the worker inherits; closed here once the worker has started. */
    private fd: number | undefined,
  ) {}

  /** A region, or why there is none (contents then travel over the socket). */
  static open(size = SHARED_REGION_BYTES): SharedRegion | { readonly reason: string } {
    const { addon, problem } = loadSharedFileAddon();
    if (!addon) return { reason: problem.split('\n')[0]! };
    if (!existsSync('/dev/shm')) return { reason: 'no /dev/shm' };
    const path = join('/dev/shm', `kiln-python-${process.pid}-${randomBytes(8).toString('hex')}`);
    let fd: number | undefined;
    try {
      fd = openSync(path, 'wx+', 0o600);
      unlinkSync(path);
      return new SharedRegion(new Uint8Array(addon.mapWritable(fd, size)), fd);
    } catch (error) {
      if (fd !== undefined) closeSync(fd);
      return { reason: error instanceof Error ? error.message : String(error) };
    }
  }

  /** A worker's two regions, calls' and answers', or why it gets none. */
  static openPair():
    { readonly calls: SharedRegion; readonly answers: SharedRegion } | { readonly reason: string } {
    const calls = SharedRegion.open();
    if (!(calls instanceof SharedRegion)) return calls;
    const answers = SharedRegion.open();
    if (answers instanceof SharedRegion) return { calls, answers };
    calls.closeDescriptor();
    return answers;
  }

  get size(): number {
    return this.region.byteLength;
  }

  /** The descriptor to hand to the worker at spawn. */
  get descriptor(): number | undefined {
    return this.fd;
  }

  /** Closes this process's descriptor once the worker holds its own (the mapping stays). */
  closeDescriptor(): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }

  /**
   * Copies the large contents into the region and returns each one's offset by content index,
   * or undefined when the region is busy, nothing is large, or they do not fit. The region is
   * then the call's until `release()`.
   */
  place(contents: readonly Content[]): Map<number, number> | undefined {
    if (this.busy || !contents.some((c) => c.bytes.byteLength >= SHARED_MIN_BYTES)) {
      return undefined;
    }
    const offsets = new Map<number, number>();
    let end = 0;
    contents.forEach((content, index) => {
      if (content.bytes.byteLength < SHARED_MIN_BYTES) return;
      const start = Math.ceil(end / SHARED_ALIGNMENT) * SHARED_ALIGNMENT;
      if (start + content.bytes.byteLength > this.region.byteLength) return;
      offsets.set(index, start);
      end = start + content.bytes.byteLength;
    });
    if (offsets.size === 0) return undefined;
    for (const [index, offset] of offsets) this.region.set(contents[index]!.bytes, offset);
    this.busy = true;
    this.calls++;
    return offsets;
  }

  release(): void {
    this.busy = false;
  }

  /** A copy of `size` bytes at `offset` (the worker wrote them; the next answer reuses them). */
  copyOut(offset: number, size: number): Uint8Array {
    if (offset + size > this.region.byteLength) {
      throw new RangeError('a shared content runs past the region');
    }
    // Not slice(): a zero-filled ArrayBuffer of 600 kB costs half again as much here. Not from
    // Node's pool either: the copy starts its own buffer, aligned for any typed array.
    const copy = Buffer.allocUnsafeSlow(size);
    copy.set(this.region.subarray(offset, offset + size));
    this.reads++;
    return new Uint8Array(copy.buffer, copy.byteOffset, size);
  }
}
