"""Kiln's frame protocol, shared with src/frames.ts.

Frame: u32 length | u32 request id | u8 kind | u32 properties length | properties (JSON) |
u16 contents | per content: u16 name length, name, u8 dtype length, dtype (empty for bytes),
u8 rank, i64 dims, u64 byte length, [tensors: zero bytes up to a multiple of 8 from the frame's
first byte], bytes. Kinds: 0 call, 1 result, 2 error.

Every call pays for this code, so it keeps to precompiled structs and cached dtypes.
"""

import json
import struct

CALL, RESULT, ERROR = 0, 1, 2
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


def decode(frame):
    """Decodes a frame read with its 4-byte length prefix at the start. Tensors are writable
    numpy views of `frame` (no copy), so the frame's buffer must be the call's own."""
    body = memoryview(frame)
    _, request_id, kind, props_len = _HEAD.unpack_from(body, 0)
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


def encode(request_id, kind, properties, contents):
    """The frame as a list of buffers, length prefix first; array data is viewed, not copied
    (os.writev sends the list as one)."""
    props = _encode_json(properties).encode() if properties else b"{}"
    head = bytearray(_HEAD.size)
    parts = [head, props, _COUNT.pack(len(contents))]
    position = 13 + len(props) + 2
    for name, value in contents:
        name_bytes = name.encode()
        meta = bytearray(_U16.pack(len(name_bytes)))
        meta += name_bytes
        if hasattr(value, "dtype"):
            value = _numpy().ascontiguousarray(value)
            if not value.dtype.isnative:
                value = value.astype(value.dtype.newbyteorder("="))
            dtype = _dtype_name(value.dtype)
            shape = value.shape
            meta.append(len(dtype))
            meta += dtype
            meta.append(len(shape))
            meta += _shape_struct(len(shape)).pack(*shape)
            size = value.nbytes
            meta += _U64.pack(size)
            meta += _PADS[_padding(position + len(meta))]
            raw = value  # os.writev reads the array's bytes in place
        else:
            raw = value if isinstance(value, (bytes, bytearray)) else bytes(value)
            size = len(raw)
            meta += b"\0\0"  # no dtype, rank 0
            meta += _U64.pack(size)
        parts.append(meta)
        parts.append(raw)
        position += len(meta) + size
    _HEAD.pack_into(head, 0, position - 4, request_id, kind, len(props))
    return parts


def _dtype_name(dtype):
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name.encode()
    return name


def frame_length(header):
    """The body length announced by a frame's 4-byte prefix."""
    return _LENGTH.unpack_from(header, 0)[0]
