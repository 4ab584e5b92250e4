"""Input and Output as DJL Serving's Python mode has them (djl_python's names and defaults);
contents are a PairList of named byte strings (a request body, exactly as it arrived) or raw
tensors (numpy arrays) carried over Kiln's frame protocol.

A batch (option batch_size > 1) is one Input with the property batch_size and every request's
properties and contents prefixed batch_NNN_ (DJL's convention); get_batches() splits it."""

import io
import json
import re
import struct

from .np_util import from_nd_list
from .pair_list import PairList

BATCH_PREFIX = "batch_%03d_"


def batch_key(index, key):
    return (BATCH_PREFIX % index) + key


def _property(properties, key):
    """A property by case-insensitive name (HTTP headers arrive lower-cased)."""
    if key in properties:
        return properties[key]
    lower = key.lower()
    return next((v for k, v in properties.items() if k.lower() == lower), None)


class Input:
    def __init__(self, properties=None, contents=None):
        self.properties = dict(properties or {})
        # Values are bytes or numpy arrays.
        self.content = PairList(pair_list=contents)
        # The handler function the call is for, as DJL's engine names it in the property handler.
        self.function_name = self.properties.get("handler")

    def __str__(self):
        return "properties: %s\ncontent: %s" % (self.properties, self.content.get_keys())

    def is_empty(self):
        return self.content.is_empty()

    def get_function_name(self):
        return self.function_name

    def get_properties(self):
        return self.properties

    def get_property(self, key):
        return _property(self.properties, key)

    def get_content(self):
        return self.content

    def contains_key(self, key):
        return self.content.get(key) is not None

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
            batch[int(key[6:9])].content.add(key[10:], value)
        return batch

    def _value(self, key=None):
        if self.content.is_empty():
            raise ValueError("the input is empty")
        if not key:
            value = self.content.get("data")
            return self.content.value_at(0) if value is None else value
        value = self.content.get(key)
        if value is None:
            raise KeyError("requested data for key:%s is not found!" % key)
        return value

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
        """The content's bytes; None for an empty input (the call a worker gets at load)."""
        return None if self.is_empty() else _as_bytes(self._value(key))

    def get_as_string(self, key=None):
        return _as_bytes(self._value(key)).decode("utf-8")

    def get_as_json(self, key=None):
        return json.loads(self.get_as_string(key))

    def get_as_numpy(self, key=None):
        """Every tensor of the input, in order: raw tensors as they came, or a body decoded
        from DJL ndlist, npz or npy (a single named content when key is given)."""
        import numpy as np

        if key:
            return _as_arrays(self._value(key))
        arrays = [v for v in self.content.get_values() if isinstance(v, np.ndarray)]
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

        return Image.open(io.BytesIO(_as_bytes(self._value(key))))

    def get_as_csv(self, key=None):
        import csv

        return list(csv.DictReader(io.StringIO(self.get_as_string(key))))


def _as_bytes(value):
    return value.tobytes() if hasattr(value, "tobytes") else bytes(value)


def _as_arrays(value):
    import numpy as np

    if isinstance(value, np.ndarray):
        return [value]
    raw = bytes(value)
    if raw[:6] == b"\x93NUMPY":
        return [_load_npy(raw)]
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


class Output:
    def __init__(self, code=200, message="OK"):
        self.code = code
        self.message = message
        self.properties = {}
        # Values are bytes or numpy arrays (raw tensors).
        self.content = PairList()
        self.finalize_function = None
        self.finalize_args = ()
        # A streamed answer: an iterable whose items are sent as they come (add_stream_content).
        self.stream_content = None
        self.stream_output_formatter = None

    def __str__(self):
        return "%d %s %s %s" % (self.code, self.message, self.properties, self.content.get_keys())

    def set_code(self, code):
        self.code = code
        return self

    def set_message(self, message):
        self.message = message
        return self

    def error(self, error, code=424, message="prediction failure"):
        """Fails the call with this code and DJL's JSON body {code, message, error}; the message
        names the error too, for answers that carry only the message."""
        self.code = code
        self.message = "%s: %s" % (message, error)
        return self.add_as_json({"code": code, "message": message, "error": error})

    def get_properties(self):
        return self.properties

    def get_property(self, key):
        return _property(self.properties, key)

    def add_property(self, key, val, batch_index=None):
        if batch_index is not None:
            key = batch_key(batch_index, key)
        self.properties[key] = str(val)
        return self

    def add(self, value, key=None, batch_index=None):
        """Adds bytes or text as they are, a numpy array as a raw tensor, anything else as JSON."""
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif isinstance(value, (bytes, bytearray, memoryview)):
            value = bytes(value)
        elif not hasattr(value, "dtype"):
            return self.add_as_json(value, key, batch_index)
        name = "data" if key is None else str(key)
        self.content.add(name if batch_index is None else batch_key(batch_index, name), value)
        return self

    def add_as_json(self, val, key=None, batch_index=None):
        self.add_property("content-type", "application/json", batch_index)
        return self.add(_encode_json(val), key, batch_index)

    def add_as_numpy(self, np_list, key=None, batch_index=None):
        """Adds each array as a raw tensor (dtype, shape, bytes): no encoding on either side;
        the answer is encoded as the client asks (DJL's ndlist unless it asks otherwise)."""
        import numpy as np

        arrays = [np_list] if isinstance(np_list, np.ndarray) else list(np_list)
        for i, array in enumerate(arrays):
            if key is not None and len(arrays) == 1:
                name = key
            else:
                name = (key or "data") + (str(i) if len(arrays) > 1 else "")
            if batch_index is not None:
                name = batch_key(batch_index, name)
            self.content.add(name, np.ascontiguousarray(array))
        return self

    def add_as_npz(self, np_list, key=None, batch_index=None):
        import numpy as np

        buffer = io.BytesIO()
        np.savez(buffer, *np_list)
        self.add_property("content-type", "tensor/npz", batch_index)
        return self.add(buffer.getvalue(), key, batch_index)

    def add_stream_content(self, stream, output_formatter=None):
        """Streams the answer: each item of `stream` (a generator, or any iterable) goes to the
        client as it comes, formatted by `output_formatter` (default: DJL's JSON lines,
        a list as {"outputs": [...]}); str and bytes are sent as they are, anything else as JSON."""
        self.stream_content = stream
        self.stream_output_formatter = (
            _default_stream_output_formatter if output_formatter is None else output_formatter
        )
        return self

    @staticmethod
    def _default_stream_output_formatter(token_texts):
        return _default_stream_output_formatter(token_texts)

    def stream_chunk(self, item):
        """One item of the stream as the bytes sent for it."""
        if self.stream_output_formatter is not None:
            item = self.stream_output_formatter(item)
        if isinstance(item, str):
            return item.encode("utf-8")
        if isinstance(item, (bytes, bytearray, memoryview)):
            return bytes(item)
        return _encode_json(item).encode("utf-8")

    def finalize(self, finalize_function, *args):
        """finalize_function(*args) runs once the answer has been sent."""
        self.finalize_function = finalize_function
        self.finalize_args = args
        return self

    def execute_finalize(self):
        if self.finalize_function:
            return self.finalize_function(*self.finalize_args)
        return None


def as_output(result):
    """A handler's result as DJL's engine answers it: None is 204 No content, an Output (or
    Kiln's list of Outputs for a batch) itself, anything else a 424 naming its type."""
    if result is None:
        return Output(204, "No content")
    if isinstance(result, (Output, list, tuple)):
        return result
    return Output().error("Invalid output type: %s" % type(result))


def _default_stream_output_formatter(token_texts):
    """DJL's default: each item a JSON line, a list of texts as {"outputs": [...]}."""
    if isinstance(token_texts, list):
        token_texts = {"outputs": token_texts}
    return (_encode_json(token_texts) + "\n").encode("utf-8")


def _encode_json(value):
    # DJL's encoding: UTF-8 as it is, and NaN or infinity refused (JSON has neither).
    return json.dumps(value, default=_json_default, ensure_ascii=False, allow_nan=False)


def _json_default(value):
    import datetime

    if isinstance(value, datetime.datetime):
        return str(value)
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
