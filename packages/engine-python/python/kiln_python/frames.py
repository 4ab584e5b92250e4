"""Kiln's frame protocol, shared with src/frames.ts.

Frame: u32 length | u32 request id | u8 kind | u32 properties length | properties (JSON) |
u16 contents | per content: u16 name length, name, u8 dtype length, dtype (empty for bytes),
u8 rank, i64 dims, u64 byte length, [tensors: zero bytes up to a multiple of 8 from the frame's
first byte], bytes. Kinds: 0 call, 1 result, 2 error, 3 chunk (a piece of a streamed answer,
sent before its result; the first carries the answer's properties), 4 ack (Node took a chunk:
the worker waits for it before producing the next, so a slow client slows the stream). A call
whose kind has SHARED_CONTENTS set carries, after each content's byte length, a location byte:
0 the bytes follow as above, 1 a u64 offset into the worker's shared input region follows
instead (see open_shared_input).

Every call pays for this code, so it keeps to precompiled structs and cached dtypes.
"""

import json
import struct

CALL, RESULT, ERROR, CHUNK, ACK = 0, 1, 2, 3, 4
SHARED_CONTENTS = 0x80
# On a call: its answer may put large contents in the shared output region (Node reads that
# answer before it sends a call whose answer could overwrite them).
ANSWER_IN_REGION = 0x40
# Contents from this size on go through a shared region when there is one.
SHARED_MIN_BYTES = 64 * 1024
_REGION_ALIGNMENT = 64
ALIGNMENT = 8

_LENGTH = struct.Struct("<I")
_HEAD = struct.Struct("<IIBI")  # length, request id, kind, properties length
_COUNT = struct.Struct("<H")
_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")
_RANK_SHAPES = {}  # rank -> Struct of the dims
_PADS = [b"\0" * n for n in range(ALIGNMENT)]
_DTYPES = {}  # dtype name -> numpy dtype
_DTYPE_NAMES = {}  # numpy dtype -> encoded name
_encode_json = json.JSONEncoder(separators=(",", ":")).encode
_np = None


def _numpy():
    # Imported on first use: a handler that never sees a tensor starts without numpy.
    global _np
    if _np is None:
        import numpy

        _np = numpy
    return _np


def preload_numpy():
    """Imports numpy ahead of the first tensor, if it is installed, so that the import counts
    against the loading timeout rather than the first call's predict_timeout."""
    try:
        _numpy()
    except ImportError:
        pass


def _shape_struct(rank):
    shape = _RANK_SHAPES.get(rank)
    if shape is None:
        shape = _RANK_SHAPES[rank] = struct.Struct("<%dq" % rank)
    return shape


def _padding(position):
    return -position % ALIGNMENT


def decode(frame, region=None):
    """Decodes a frame read with its 4-byte length prefix at the start. Tensors are writable
    numpy views of `frame` (no copy), so the frame's buffer must be the call's own. Contents in
    the shared input `region` (a memoryview) are copied out: the next call reuses it."""
    body = memoryview(frame)
    _, request_id, kind, props_len = _HEAD.unpack_from(body, 0)
    located = kind & SHARED_CONTENTS
    kind &= ~SHARED_CONTENTS
    if located and region is None:
        raise ValueError("a call refers to shared memory this worker does not have")
    offset = 13
    properties = json.loads(body[offset : offset + props_len].tobytes()) if props_len > 2 else {}
    offset += props_len
    (count,) = _COUNT.unpack_from(body, offset)
    offset += 2
    contents = []
    for _ in range(count):
        (name_len,) = _U16.unpack_from(body, offset)
        offset += 2
        name = str(body[offset : offset + name_len], "utf-8")
        offset += name_len
        dtype_len = body[offset]
        offset += 1
        dtype = str(body[offset : offset + dtype_len], "ascii")
        offset += dtype_len
        rank = body[offset]
        offset += 1
        shape = _shape_struct(rank).unpack_from(body, offset)
        offset += 8 * rank
        (size,) = _U64.unpack_from(body, offset)
        offset += 8
        if located:
            location = body[offset]
            offset += 1
            if location == 1:
                (at,) = _U64.unpack_from(body, offset)
                offset += 8
                contents.append((name, _from_region(region, at, size, dtype, shape)))
                continue
        if dtype:
            offset += _padding(offset)
            np = _numpy()
            array_dtype = _DTYPES.get(dtype)
            if array_dtype is None:
                array_dtype = _DTYPES[dtype] = np.dtype(dtype)
            value = np.frombuffer(body, array_dtype, size // array_dtype.itemsize, offset)
            value = value.reshape(shape)
        else:
            value = body[offset : offset + size].tobytes()
        offset += size
        contents.append((name, value))
    return request_id, kind, properties, contents


def _from_region(region, at, size, dtype, shape):
    if at + size > len(region):
        raise ValueError("a shared content runs past the region")
    source = region[at : at + size]
    if not dtype:
        return source.tobytes()
    np = _numpy()
    array_dtype = _DTYPES.get(dtype)
    if array_dtype is None:
        array_dtype = _DTYPES[dtype] = np.dtype(dtype)
    return np.frombuffer(source, array_dtype, size // array_dtype.itemsize).reshape(shape).copy()


def open_shared_regions(environ):
    """The shared regions Node handed this worker as inherited descriptors: calls' contents
    (KILN_SHARED_INPUT_FD, mapped read-only) and answers' (KILN_SHARED_OUTPUT_FD, writable);
    (None, None) without them."""
    return (
        _map_region(environ, "KILN_SHARED_INPUT", writable=False),
        _map_region(environ, "KILN_SHARED_OUTPUT", writable=True),
    )


def _map_region(environ, prefix, writable):
    fd = environ.get(prefix + "_FD")
    size = environ.get(prefix + "_BYTES")
    if not fd or not size:
        return None
    import mmap

    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    return memoryview(mmap.mmap(int(fd), int(size), flags=mmap.MAP_SHARED, prot=prot))


class AnswerTooLarge(Exception):
    """An answer whose properties and contents hold more bytes than the worker may send."""

    def __init__(self, size, limit):
        super().__init__(
            "the handler's answer holds %d bytes, more than max_response_size (%d bytes)"
            % (size, limit)
        )


def encode(request_id, kind, properties, contents, region=None, limit=None):
    """The frame as a list of buffers, length prefix first; array data is viewed, not copied
    (os.writev sends the list as one). With a shared output `region` (a writable memoryview),
    contents from SHARED_MIN_BYTES on are copied into it and the frame refers to them. Raises
    AnswerTooLarge, before anything is copied, when properties and contents pass `limit` bytes."""
    props = _encode_json(properties).encode() if properties else b"{}"
    prepared = [_prepared(value) for _, value in contents]
    if limit is not None:
        size = len(props) + sum(p[3] for p in prepared)
        if size > limit:
            raise AnswerTooLarge(size, limit)
    head = bytearray(_HEAD.size)
    parts = [head, props, _COUNT.pack(len(contents))]
    position = 13 + len(props) + 2
    places = None
    if region is not None and any(p[3] >= SHARED_MIN_BYTES for p in prepared):
        places = _places(prepared, region)
    for index, (name, _) in enumerate(contents):
        dtype, shape, raw, size = prepared[index]
        name_bytes = name.encode()
        meta = bytearray(_U16.pack(len(name_bytes)))
        meta += name_bytes
        meta.append(len(dtype))
        meta += dtype
        meta.append(len(shape))
        meta += _shape_struct(len(shape)).pack(*shape)
        meta += _U64.pack(size)
        at = places.get(index) if places else None
        if places:
            meta.append(0 if at is None else 1)
        if at is not None:
            meta += _U64.pack(at)
            parts.append(meta)
            position += len(meta)
            continue
        if dtype:
            meta += _PADS[_padding(position + len(meta))]
        parts.append(meta)
        parts.append(raw)
        position += len(meta) + size
    if places:
        kind |= SHARED_CONTENTS
    _HEAD.pack_into(head, 0, position - 4, request_id, kind, len(props))
    return parts


def _prepared(value):
    """(dtype name, shape, buffer, byte length) of a content: arrays contiguous and native."""
    if hasattr(value, "dtype"):
        value = _numpy().ascontiguousarray(value)
        if not value.dtype.isnative:
            value = value.astype(value.dtype.newbyteorder("="))
        return _dtype_name(value.dtype), value.shape, value, value.nbytes
    raw = value if isinstance(value, (bytes, bytearray)) else bytes(value)
    return b"", (), raw, len(raw)


def _places(prepared, region):
    """Copies the large contents into the region: their offsets by content index."""
    places = {}
    end = 0
    for index, (_, _, raw, size) in enumerate(prepared):
        if size < SHARED_MIN_BYTES:
            continue
        start = -(-end // _REGION_ALIGNMENT) * _REGION_ALIGNMENT
        if start + size > len(region):
            continue
        region[start : start + size] = memoryview(raw).cast("B")
        places[index] = start
        end = start + size
    return places


def _dtype_name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name.encode()
    return name


def frame_length(header):
    """The body length announced by a frame's 4-byte prefix."""
    return _LENGTH.unpack_from(header, 0)[0]
