"""One Kiln Python worker: loads model.py, then answers framed calls on fd 3 with frames on fd 4.

Frame: u32 length | u32 request id | u8 kind | u32 properties length | properties (JSON) |
u16 contents | per content: u16 name length, name, u8 dtype length, dtype (empty for bytes),
u8 rank, i64 dims, u64 byte length, bytes. Kinds: 0 call, 1 result, 2 error.
"""

import importlib.util
import json
import os
import struct
import sys
import traceback

from .inputs import Input, Output

CALL, RESULT, ERROR = 0, 1, 2


def read_exact(stream, size):
    data = bytearray()
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def decode(body):
    request_id, kind, props_len = struct.unpack_from("<IBI", body, 0)
    offset = 9
    properties = json.loads(body[offset : offset + props_len] or b"{}")
    offset += props_len
    (count,) = struct.unpack_from("<H", body, offset)
    offset += 2
    contents = []
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", body, offset)
        offset += 2
        name = body[offset : offset + name_len].decode()
        offset += name_len
        dtype_len = body[offset]
        offset += 1
        dtype = body[offset : offset + dtype_len].decode()
        offset += dtype_len
        rank = body[offset]
        offset += 1
        shape = struct.unpack_from("<%dq" % rank, body, offset)
        offset += 8 * rank
        (size,) = struct.unpack_from("<Q", body, offset)
        offset += 8
        raw = body[offset : offset + size]
        offset += size
        if dtype:
            import numpy as np

            value = np.frombuffer(raw, dtype=dtype).reshape(shape)
        else:
            value = raw
        contents.append((name, value))
    return request_id, kind, properties, contents


def encode(request_id, kind, properties, contents):
    parts = []
    props = json.dumps(properties).encode()
    parts.append(struct.pack("<IBI", request_id, kind, len(props)))
    parts.append(props)
    parts.append(struct.pack("<H", len(contents)))
    for name, value in contents:
        name_bytes = name.encode()
        if hasattr(value, "dtype"):
            dtype = value.dtype.name.encode()
            shape = value.shape
            raw = value.tobytes()
        else:
            dtype, shape, raw = b"", (), bytes(value)
        parts.append(struct.pack("<H", len(name_bytes)) + name_bytes)
        parts.append(struct.pack("<B", len(dtype)) + dtype)
        parts.append(struct.pack("<B%dq" % len(shape), len(shape), *shape))
        parts.append(struct.pack("<Q", len(raw)))
        parts.append(raw)
    body = b"".join(parts)
    return struct.pack("<I", len(body)) + body


def load_handler(model_dir, entry_point, handler_name):
    sys.path.insert(0, model_dir)
    spec = importlib.util.spec_from_file_location("model", os.path.join(model_dir, entry_point))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler = getattr(module, handler_name, None)
    if handler is None:
        raise AttributeError("%s has no function %s" % (entry_point, handler_name))
    return handler


def batched_input(properties, contents):
    """Splits a batch call (contents named '<index>:<name>') into one Input per request."""
    size = int(properties["batch_size"])
    requests = [Input() for _ in range(size)]
    for name, value in contents:
        index, _, inner = name.partition(":")
        requests[int(index)].content.append((inner, value))
    batch = Input(properties, contents)
    batch._batches = requests
    return batch


def main():
    model_dir, entry_point, handler_name = sys.argv[1:4]
    requests = os.fdopen(3, "rb", buffering=0)
    responses = os.fdopen(4, "wb", buffering=0)
    handler = None
    while True:
        header = read_exact(requests, 4)
        if header is None:
            return
        (length,) = struct.unpack("<I", header)
        body = read_exact(requests, length)
        if body is None:
            return
        request_id, _, properties, contents = decode(body)
        try:
            if handler is None:
                handler = load_handler(model_dir, entry_point, handler_name)
            inputs = (
                batched_input(properties, contents)
                if "batch_size" in properties
                else Input(properties, contents)
            )
            output = handler(inputs)
            if output is None:
                output = Output()
            if isinstance(output, list):
                output = _merge_batch(output)
            props = dict(output.properties)
            props["code"] = output.code
            props["message"] = output.message
            frame = encode(request_id, RESULT, props, output.content)
        except Exception as error:  # noqa: BLE001 - every handler failure goes back as a frame
            traceback.print_exc(file=sys.stderr)
            message = "%s: %s" % (type(error).__name__, error)
            frame = encode(request_id, ERROR, {"message": message}, [])
        responses.write(frame)


def _merge_batch(outputs):
    merged = Output()
    for index, output in enumerate(outputs):
        for name, value in output.content:
            merged.content.append(("%d:%s" % (index, name), value))
    return merged


if __name__ == "__main__":
    main()
