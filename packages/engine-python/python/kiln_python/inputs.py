"""Input and Output as DJL Serving's Python mode has them; contents are named byte strings
(a request body, exactly as it arrived) or raw tensors (numpy arrays) carried over Kiln's
frame protocol.

A batch (option batch_size > 1) is one Input with the property batch_size and every request's
properties and contents prefixed batch_NNN_ (DJL's convention); get_batches() splits it."""

import io
import json
import re
import struct

BATCH_PREFIX = "batch_%03d_"


def batch_key(index, key):
    return (BATCH_PREFIX % index) + key


class Input:
    def __init__(self, properties=None, contents=None):
        self.properties = dict(properties or {})
        # A list of (name, value) where value is bytes or a numpy array.
        self.content = list(contents or [])

    def __str__(self):
        return "properties: %s\ncontent: %s" % (self.properties, [n for n, _ in self.content])

    def is_empty(self):
        return not self.content

    def get_properties(self):
        return self.properties

    def get_property(self, key):
        """A property by case-insensitive name (HTTP headers arrive lower-cased)."""
        if key in self.properties:
            return self.properties[key]
        lower = key.lower()
        return next((v for k, v in self.properties.items() if k.lower() == lower), None)

    def get_content(self):
        return self.content

    def contains_key(self, key):
        return any(name == key for name, _ in self.content)

    def is_batch(self):
        return "batch_size" in self.properties

    def get_batch_size(self):
        return int(self.properties.get("batch_size", 1))

    def get_batches(self):
        """One Input per request of a batch (the Input itself when it is not a batch)."""
        if not self.is_batch():
            return [self]
        batch = [Input() for _ in range(self.get_batch_size())]
        for key, value in self.properties.items():
            if key.startswith("batch_") and key[6:9].isdigit():
                batch[int(key[6:9])].properties[key[10:]] = value
        for key, value in self.content:
            batch[int(key[6:9])].content.append((key[10:], value))
        return batch

    def _value(self, key=None):
        if not self.content:
            raise ValueError("the input is empty")
        if key is None:
            for name, value in self.content:
                if name == "data":
                    return value
            return self.content[0][1]
        for name, value in self.content:
            if name == key:
                return value
        raise KeyError(key)

    def get_data(self, key=None):
        """The content decoded by its content-type, as DJL's Input.get_data does."""
        content_type = (self.get_property("content-type") or "").lower()
        if self.is_empty():
            return None
        if content_type.startswith("tensor/"):
            return self.get_as_numpy(key)
        if content_type.startswith("application/json"):
            return self.get_as_json(key)
        if content_type.startswith("text/"):
            return self.get_as_string(key)
        if content_type.startswith("image/"):
            return self.get_as_image(key)
        return self.get_as_bytes(key)

    def get_as_bytes(self, key=None):
        value = self._value(key)
        return value.tobytes() if hasattr(value, "tobytes") else bytes(value)

    def get_as_string(self, key=None):
        return self.get_as_bytes(key).decode("utf-8")

    def get_as_json(self, key=None):
        return json.loads(self.get_as_string(key))

    def get_as_numpy(self, key=None):
        """Every tensor of the input, in order: raw tensors as they came, or a body decoded
        from DJL ndlist, npz or npy (a single named content when key is given)."""
        import numpy as np

        if key is not None:
            return _as_arrays(self._value(key))
        arrays = [v for _, v in self.content if isinstance(v, np.ndarray)]
        if arrays:
            return arrays
        return _as_arrays(self._value())

    def get_as_npz(self, key=None):
        import numpy as np

        value = self._value(key)
        if isinstance(value, np.ndarray):
            return [value]
        data = np.load(io.BytesIO(bytes(value)), allow_pickle=False)
        if isinstance(data, np.ndarray):
            return [data]
        return [data[name] for name in data.files]

    def get_as_image(self, key=None):
        from PIL import Image

        return Image.open(io.BytesIO(self.get_as_bytes(key)))

    def get_as_csv(self, key=None):
        import csv

        return list(csv.DictReader(io.StringIO(self.get_as_string(key))))


def _as_arrays(value):
    import numpy as np

    if isinstance(value, np.ndarray):
        return [value]
    raw = bytes(value)
    if raw[:6] == b"\x93NUMPY":
        return [_load_npy(raw)]
    if raw[:2] == b"PK":
        data = np.load(io.BytesIO(raw), allow_pickle=False)
        return [data[name] for name in data.files]
    return from_nd_list(raw)


_NPY_HEADER = re.compile(
    r"^\{'descr': '([<>|=][a-zA-Z]\d*)', 'fortran_order': False, 'shape': \(([\d, ]*)\), \}"
)


def _load_npy(raw):
    """np.load for the common npy (version 1-3, C order, plain dtype) without its header
    parser (ast.literal_eval costs ~100 µs a call); anything else goes to np.load."""
    import numpy as np

    major = raw[6]
    if major in (1, 2, 3):
        size_format, start = ("<H", 10) if major == 1 else ("<I", 12)
        (header_len,) = struct.unpack_from(size_format, raw, 8)
        header = raw[start : start + header_len].decode("latin1")
        match = _NPY_HEADER.match(header)
        if match:
            dtype = np.dtype(match.group(1))
            shape = tuple(int(d) for d in match.group(2).replace(" ", "").split(",") if d)
            count = 1
            for dim in shape:
                count *= dim
            offset = start + header_len
            if dtype.kind != "O" and len(raw) - offset == count * dtype.itemsize:
                # Copied, as np.load does: the array is the handler's to change.
                array = np.frombuffer(raw, dtype=dtype, count=count, offset=offset)
                return array.reshape(shape).copy()
    return np.load(io.BytesIO(raw), allow_pickle=False)


# DJL's ndlist data type names and numpy's.
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


def from_nd_list(raw):
    """Decodes DJL's ndlist encoding (versions 1 to 3, dense numeric arrays)."""
    import numpy as np

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


def to_nd_list(arrays):
    """Encodes arrays as DJL's ndlist (version 3, little-endian data)."""
    import numpy as np

    def utf(text):
        data = text.encode("utf-8")
        return struct.pack(">H", len(data)) + data

    parts = [struct.pack(">i", len(arrays))]
    for array in arrays:
        array = np.ascontiguousarray(array)
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
        parts += [utf("NDAR"), struct.pack(">iB", 3, 0), utf("DENSE")]
        parts.append(utf(_NUMPY_DTYPES[array.dtype.name]))
        parts.append(struct.pack(">i%dq" % array.ndim, array.ndim, *array.shape))
        parts.append(struct.pack(">i", 0) + b"<" + struct.pack(">i", len(data)) + data)
    return b"".join(parts)


class Output:
    def __init__(self, code=200, message="OK"):
        self.code = code
        self.message = message
        self.properties = {}
        self.content = []

    def __str__(self):
        return "%d %s %s %s" % (self.code, self.message, self.properties, [n for n, _ in self.content])

    def set_code(self, code):
        self.code = code
        return self

    def set_message(self, message):
        self.message = message
        return self

    def error(self, error, code=424, message="prediction failure"):
        """Fails the call with this code; the message is what the client reads."""
        self.code = code
        self.message = "%s: %s" % (message, error)
        return self

    def add_property(self, key, value, batch_index=None):
        if batch_index is not None:
            key = batch_key(batch_index, key)
        self.properties[key] = str(value)
        return self

    def add(self, value, key=None, batch_index=None):
        """Adds bytes or text as they are, a numpy array as a raw tensor, anything else as JSON."""
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif isinstance(value, (bytes, bytearray, memoryview)):
            value = bytes(value)
        elif not hasattr(value, "dtype"):
            return self.add_as_json(value, key, batch_index)
        name = key or "data"
        self.content.append((name if batch_index is None else batch_key(batch_index, name), value))
        return self

    def add_as_json(self, value, key=None, batch_index=None):
        self.add_property("content-type", "application/json", batch_index)
        return self.add(json.dumps(value, default=_json_default), key, batch_index)

    def add_as_numpy(self, arrays, key=None, batch_index=None):
        """Adds each array as a raw tensor (dtype, shape, bytes): no encoding on either side."""
        import numpy as np

        for i, array in enumerate(arrays):
            if key is not None and len(arrays) == 1:
                name = key
            else:
                name = (key or "data") + (str(i) if len(arrays) > 1 else "")
            if batch_index is not None:
                name = batch_key(batch_index, name)
            self.content.append((name, np.ascontiguousarray(array)))
        return self

    def add_as_npz(self, arrays, key=None, batch_index=None):
        import numpy as np

        buffer = io.BytesIO()
        np.savez(buffer, *arrays)
        self.add_property("content-type", "tensor/npz", batch_index)
        return self.add(buffer.getvalue(), key, batch_index)


def _json_default(value):
    try:
        import numpy as np

        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return float(value)
        if isinstance(value, np.ndarray):
            return value.tolist()
    except ImportError:
        pass
    raise TypeError("%s is not JSON serializable" % type(value).__name__)
