import { open, type FileHandle } from 'node:fs/promises';

/** Bytes read at a time; a scan reads the small fields and seeks past initializers. */
const WINDOW = 64 * 1024;

/**
 * The graph input names of an ONNX file, read without loading it: a protobuf wire scan of
 * ModelProto.graph (7) → GraphProto.input (11) → ValueInfoProto.name (1) that seeks past
 * nodes' and initializers' bytes, so a file with its weights inside costs a few reads.
 */
export async function graphInputNames(file: string): Promise<string[]> {
  const handle = await open(file, 'r');
  try {
    const reader = new WireReader(handle, (await handle.stat()).size);
    const names: string[] = [];
    for await (const graph of reader.fields(0, reader.size, 7)) {
      for await (const input of reader.fields(graph.start, graph.end, 11)) {
        // A ValueInfoProto is small: its name is read from its own bytes.
        const bytes = await reader.bytes(input.start, input.end);
        const name = firstField(bytes, 1);
        if (name) names.push(new TextDecoder().decode(name));
      }
    }
    return names;
  } finally {
    await handle.close();
  }
}

interface Span {
  readonly start: number;
  readonly end: number;
}

class WireReader {
  private window = new Uint8Array(0);
  private windowStart = 0;

  constructor(
    private readonly handle: FileHandle,
    readonly size: number,
  ) {}

  /** The length-delimited fields numbered `wanted` between start and end, in order. */
  async *fields(start: number, end: number, wanted: number): AsyncGenerator<Span> {
    let at = start;
    while (at < end) {
      const tag = await this.varint(at, end);
      at = tag.next;
      const wire = tag.value % 8;
      if (wire === 0) at = (await this.varint(at, end)).next;
      else if (wire === 1) at += 8;
      else if (wire === 5) at += 4;
      else if (wire === 2) {
        const length = await this.varint(at, end);
        const span = { start: length.next, end: length.next + length.value };
        if (span.end > end) throw new Error('truncated protobuf field');
        if (Math.floor(tag.value / 8) === wanted) yield span;
        at = span.end;
      } else throw new Error(`unsupported protobuf wire type ${wire}`);
    }
  }

  async bytes(start: number, end: number): Promise<Uint8Array> {
    const out = new Uint8Array(end - start);
    await this.handle.read(out, 0, out.length, start);
    return out;
  }

  private async varint(at: number, end: number): Promise<{ value: number; next: number }> {
    let value = 0;
    let scale = 1;
    for (let i = at; i < end && i < at + 10; i++) {
      const byte = await this.byteAt(i);
      value += (byte & 0x7f) * scale;
      scale *= 128;
      if (byte < 0x80) return { value, next: i + 1 };
    }
    throw new Error('malformed protobuf varint');
  }

  private async byteAt(at: number): Promise<number> {
    const offset = at - this.windowStart;
    if (offset >= 0 && offset < this.window.length) return this.window[offset]!;
    const window = new Uint8Array(Math.min(WINDOW, this.size - at));
    const { bytesRead } = await this.handle.read(window, 0, window.length, at);
    if (bytesRead === 0) throw new Error('truncated protobuf');
    this.window = window.subarray(0, bytesRead);
    this.windowStart = at;
    return this.window[0]!;
  }
}

/** The first length-delimited field numbered `wanted` of a small message, else undefined. */
function firstField(bytes: Uint8Array, wanted: number): Uint8Array | undefined {
  let at = 0;
  const varint = () => {
    let value = 0;
    let scale = 1;
    for (;;) {
      const byte = bytes[at++];
      if (byte === undefined) throw new Error('malformed protobuf varint');
      value += (byte & 0x7f) * scale;
      scale *= 128;
      if (byte < 0x80) return value;
    }
  };
  while (at < bytes.length) {
    const tag = varint();
    const wire = tag % 8;
    if (wire === 0) varint();
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      if (Math.floor(tag / 8) === wanted) return bytes.subarray(at, at + length);
      at += length;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
  }
  return undefined;
}
