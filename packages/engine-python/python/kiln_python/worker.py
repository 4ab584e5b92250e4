"""One Kiln Python worker: loads model.py, then answers framed calls on fd 3 with frames on fd 4.

Frame: u32 length | u32 request id | u8 kind | u32 properties length | properties (JSON) |
u16 contents | per content: u16 name length, name, u8 dtype length, dtype (empty for bytes),
u8 rank, i64 dims, u64 byte length, [tensors: zero bytes up to a multiple of 8 from the frame's
first byte], bytes. Kinds: 0 call, 1 result, 2 error.
"""

import importlib.util
import json
import os
import struct
import sys
import time
import traceback

from .inputs import Input, Output, batch_key

CALL, RESULT, ERROR = 0, 1, 2
ALIGNMENT = 8


def _padding(position):
    return (ALIGNMENT - position % ALIGNMENT) % ALIGNMENT


def read_exact(stream, size, lead=0):
    """Reads exactly size bytes into one buffer (no joins), after `lead` unused bytes; None at
    end of stream."""
    data = bytearray(lead + size)
    view = memoryview(data)
    got = lead
    while got < lead + size:
        count = stream.readinto(view[got:])
        if not count:
            return None
        got += count
    return data


def decode(frame):
    """Decodes a frame read with its 4-byte length prefix's place kept at the start."""
    body = memoryview(frame)
    request_id, kind, props_len = struct.unpack_from("<IBI", body, 4)
    offset = 13
    properties = json.loads(bytes(body[offset : offset + props_len]) or b"{}")
    offset += props_len
    (count,) = struct.unpack_from("<H", body, offset)
    offset += 2
    contents = []
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", body, offset)
        offset += 2
        name = bytes(body[offset : offset + name_len]).decode()
        offset += name_len
        dtype_len = body[offset]
        offset += 1
        dtype = bytes(body[offset : offset + dtype_len]).decode()
        offset += dtype_len
        rank = body[offset]
        offset += 1
        shape = struct.unpack_from("<%dq" % rank, body, offset)
        offset += 8 * rank
        (size,) = struct.unpack_from("<Q", body, offset)
        offset += 8
        if dtype:
            offset += _padding(offset)
        raw = body[offset : offset + size]
        offset += size
        if dtype:
            import numpy as np

            # A view of the frame's own buffer: no copy, and writable.
            value = np.frombuffer(raw, dtype=dtype).reshape(shape)
        else:
            value = bytes(raw)
        contents.append((name, value))
    return request_id, kind, properties, contents


def encode(request_id, kind, properties, contents):
    """The frame as a list of buffers (array data viewed, not copied), length prefix first."""
    props = json.dumps(properties).encode()
    parts = [b"", struct.pack("<IBI", request_id, kind, len(props)), props]
    parts.append(struct.pack("<H", len(contents)))
    position = 4 + 9 + len(props) + 2
    for name, value in contents:
        name_bytes = name.encode()
        if hasattr(value, "dtype"):
            import numpy as np

            value = np.ascontiguousarray(value)
            dtype = value.dtype.name.encode()
            shape = value.shape
            # The array's own bytes, viewed, not copied.
            raw = value.reshape(-1).view(np.uint8)
        else:
            dtype, shape, raw = b"", (), bytes(value)
        meta = b"".join(
            [
                struct.pack("<H", len(name_bytes)) + name_bytes,
                struct.pack("<B", len(dtype)) + dtype,
                struct.pack("<B%dq" % len(shape), len(shape), *shape),
                struct.pack("<Q", len(raw)),
            ]
        )
        if dtype:
            meta += b"\0" * _padding(position + len(meta))
        parts.append(meta)
        parts.append(raw)
        position += len(meta) + len(raw)
    parts[0] = struct.pack("<I", position - 4)
    return parts


def write_all(fd, parts):
    """Writes the parts with as few system calls as the kernel allows, copying nothing."""
    views = [memoryview(part).cast("B") for part in parts if len(part)]
    while views:
        written = os.writev(fd, views[:1024])
        while written and views:
            if written >= len(views[0]):
                written -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][written:]
                written = 0


def load_handler(model_dir, entry_point, handler_name):
    sys.path.insert(0, model_dir)
    spec = importlib.util.spec_from_file_location("model", os.path.join(model_dir, entry_point))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler = getattr(module, handler_name, None)
    if handler is None:
        raise AttributeError("%s has no function %s" % (entry_point, handler_name))
    return handler


def handle_call(handler, properties, contents):
    """Runs the handler on one call; returns the result's properties and contents."""
    output = handler(Input(properties, contents))
    if output is None:
        output = Output()
    if isinstance(output, (list, tuple)):
        return _merge_batch(output)
    props = dict(output.properties)
    props["code"] = output.code
    props["message"] = output.message
    return props, output.content


def _merge_batch(outputs):
    """A handler may answer a batch with one Output per request (Kiln's shorthand for the
    batch_NNN_ prefixes DJL handlers write themselves)."""
    props = {}
    contents = []
    for index, output in enumerate(outputs):
        if output is None:
            output = Output()
        for key, value in output.properties.items():
            props[batch_key(index, key)] = value
        props[batch_key(index, "code")] = output.code
        props[batch_key(index, "message")] = output.message
        for name, value in output.content:
            contents.append((batch_key(index, name), value))
    return props, contents


def widen_pipes(*fds):
    """Grows the pipes to the system's most (1 MiB by default) so that a tensor of up to that
    size crosses in one write instead of 64 kB at a time, each a wake-up of the other side."""
    try:
        import fcntl

        with open("/proc/sys/fs/pipe-max-size") as f:
            size = min(int(f.read()), 16 << 20)
        for fd in fds:
            fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ValueError, ImportError):
        pass  # Not Linux, or not allowed: the default size works, only slower.


def main():
    model_dir, entry_point, handler_name = sys.argv[1:4]
    widen_pipes(3, 4)
    requests = os.fdopen(3, "rb", buffering=0)
    responses = os.fdopen(4, "wb", buffering=0)
    handler = None
    clock = time.perf_counter
    while True:
        header = read_exact(requests, 4)
        if header is None:
            return
        (length,) = struct.unpack("<I", header)
        # The prefix's place is kept so offsets (and tensor alignment) count from the frame start.
        body = read_exact(requests, length, lead=4)
        if body is None:
            return
        request_id, _, properties, contents = decode(body)
        started = clock()
        try:
            if handler is None:
                handler = load_handler(model_dir, entry_point, handler_name)
            props, out = handle_call(handler, properties, contents)
            props["kiln_handler_us"] = int((clock() - started) * 1e6)
            frame = encode(request_id, RESULT, props, out)
        except Exception as error:  # noqa: BLE001 - every handler failure goes back as a frame
            traceback.print_exc(file=sys.stderr)
            message = "%s: %s" % (type(error).__name__, error)
            frame = encode(request_id, ERROR, {"message": message}, [])
        write_all(responses.fileno(), frame)


if __name__ == "__main__":
    main()
