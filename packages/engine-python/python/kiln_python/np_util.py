"""DJL's NDList encoding (`tensor/ndlist`) for numpy arrays, as djl_python.np_util has it."""

import io
import struct

# DJL's ndlist data type names and numpy's. DJL's Python encoder names booleans BOOL, its Java
# one BOOLEAN: both are read, BOOLEAN (what every DJL reader takes) is written.
_DJL_DTYPES = {
    "FLOAT32": "<f4",
    "FLOAT64": "<f8",
    "FLOAT16": "<f2",
    "UINT8": "u1",
    "INT8": "i1",
    "INT16": "<i2",
    "UINT16": "<u2",
    "INT32": "<i4",
    "UINT32": "<u4",
    "INT64": "<i8",
    "UINT64": "<u8",
    "BOOLEAN": "?",
    "BOOL": "?",
}
_NUMPY_DTYPES = {
    "float32": "FLOAT32",
    "float64": "FLOAT64",
    "float16": "FLOAT16",
    "uint8": "UINT8",
    "int8": "INT8",
    "int16": "INT16",
    "uint16": "UINT16",
    "int32": "INT32",
    "uint32": "UINT32",
    "int64": "INT64",
    "uint64": "UINT64",
    "bool": "BOOLEAN",
}


def _read_utf(raw, offset):
    (length,) = struct.unpack_from(">H", raw, offset)
    offset += 2
    return raw[offset : offset + length].decode("utf-8"), offset + length


def from_nd_list(encoded):
    """The arrays of a DJL ndlist (versions 1 to 3, dense numeric arrays), or of an npz, as
    DJL's from_nd_list also takes one."""
    import numpy as np

    raw = bytes(encoded)
    if raw[:2] == b"PK":
        with np.load(io.BytesIO(raw), allow_pickle=False) as npz:
            return [npz[name] for name in npz.files]
    try:
        (count,) = struct.unpack_from(">i", raw, 0)
        offset = 4
        arrays = []
        for _ in range(count):
            magic, offset = _read_utf(raw, offset)
            if magic != "NDAR":
                raise ValueError("array does not start with NDAR")
            (version,) = struct.unpack_from(">i", raw, offset)
            offset += 4
            if version >= 2:
                has_name = raw[offset]
                offset += 1
                if has_name:
                    _, offset = _read_utf(raw, offset)
            _, offset = _read_utf(raw, offset)  # sparse format
            djl_dtype, offset = _read_utf(raw, offset)
            (rank,) = struct.unpack_from(">i", raw, offset)
            offset += 4
            shape = struct.unpack_from(">%dq" % rank, raw, offset)
            offset += 8 * rank
            (layout,) = struct.unpack_from(">i", raw, offset)
            offset += 4 + 2 * layout
            order = "<"
            if version >= 3:
                order = chr(raw[offset])
                offset += 1
            (length,) = struct.unpack_from(">i", raw, offset)
            offset += 4
            dtype = np.dtype(_DJL_DTYPES[djl_dtype]).newbyteorder(order)
            array = np.frombuffer(raw, dtype=dtype, count=length // dtype.itemsize, offset=offset)
            offset += length
            arrays.append(array.reshape(shape).astype(dtype.newbyteorder("=")))
        return arrays
    except (struct.error, KeyError, IndexError, UnicodeDecodeError) as error:
        raise ValueError("the body is not npy, npz or DJL ndlist: %s" % error) from error


def to_nd_list(np_list):
    """A list of arrays (or one array) as DJL's ndlist: version 3, little-endian data."""
    import numpy as np

    def utf(text):
        data = text.encode("utf-8")
        return struct.pack(">H", len(data)) + data

    arrays = [np_list] if isinstance(np_list, np.ndarray) else list(np_list)
    parts = [struct.pack(">i", len(arrays))]
    for array in arrays:
        array = np.ascontiguousarray(array)
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        parts += [utf("NDAR"), struct.pack(">iB", 3, 0), utf("DENSE")]
        parts.append(utf(_NUMPY_DTYPES[array.dtype.name]))
        parts.append(struct.pack(">i%dq" % array.ndim, array.ndim, *array.shape))
        parts.append(struct.pack(">i", 0) + b"<" + struct.pack(">i", len(data)) + data)
    return b"".join(parts)
