/** A length-delimited protobuf field: its bytes, and where its tag starts. */
export interface Span {
  readonly start: number;
  readonly end: number;
  /** Where the field's tag begins (the span's header runs from here to `start`). */
  readonly tagStart: number;
}

/** The length-delimited fields numbered `wanted` between start and end, in order. */
export function fields(bytes: Uint8Array, start: number, end: number, wanted: number): Span[] {
  const found: Span[] = [];
  let at = start;
  while (at < end) {
    const tagStart = at;
    const tag = varint(bytes, at, end);
    at = tag.next;
    const wire = tag.value % 8;
    const field = Math.floor(tag.value / 8);
    if (wire === 0) at = varint(bytes, at, end).next;
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint(bytes, at, end);
      const span = { start: length.next, end: length.next + length.value, tagStart };
      if (span.end > end) throw new Error('truncated protobuf field');
      if (field === wanted) found.push(span);
      at = span.end;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
  }
  return found;
}

/** The last varint field numbered `wanted` between start and end, as a signed 64-bit value. */
export function intField(
  bytes: Uint8Array,
  start: number,
  end: number,
  wanted: number,
): bigint | undefined {
  let found: bigint | undefined;
  let at = start;
  while (at < end) {
    const tag = varint(bytes, at, end);
    at = tag.next;
    const wire = tag.value % 8;
    if (wire === 0) {
      const value = bigVarint(bytes, at, end);
      if (Math.floor(tag.value / 8) === wanted) found = BigInt.asIntN(64, value.value);
      at = value.next;
    } else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint(bytes, at, end);
      at = length.next + length.value;
    } else throw new Error(`unsupported protobuf wire type ${wire}`);
  }
  return found;
}

/** The UTF-8 text of a length-delimited field. */
export function textOf(bytes: Uint8Array, span: Span): string {
  return new TextDecoder().decode(bytes.subarray(span.start, span.end));
}

export function varint(
  bytes: Uint8Array,
  at: number,
  end: number,
): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = at; i < end && i < at + 10; i++) {
    const byte = bytes[i]!;
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if (byte < 0x80) return { value, next: i + 1 };
  }
  throw new Error('malformed protobuf varint');
}

function bigVarint(bytes: Uint8Array, at: number, end: number): { value: bigint; next: number } {
  let value = 0n;
  for (let i = at, shift = 0n; i < end && i < at + 10; i++, shift += 7n) {
    const byte = bytes[i]!;
    value |= BigInt(byte & 0x7f) << shift;
    if (byte < 0x80) return { value, next: i + 1 };
  }
  throw new Error('malformed protobuf varint');
}

/** A field's bytes as protobuf writes it: a length-delimited `payload`, or a varint. */
export function encodeField(field: number, payload: Uint8Array | string | number): Uint8Array {
  if (typeof payload === 'number') return concat([encodeVarint(field * 8), encodeVarint(payload)]);
  const body = typeof payload === 'string' ? new TextEncoder().encode(payload) : payload;
  return concat([encodeVarint(field * 8 + 2), encodeVarint(body.length), body]);
}

export function encodeVarint(value: number): Uint8Array {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  out.push(rest);
  return Uint8Array.from(out);
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
