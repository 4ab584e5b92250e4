"""One Kiln Python worker: loads model.py, then answers framed calls (see frames.py) read from
fd 3 with frames written to fd 4, one call at a time, with a blocking read between calls."""

import importlib.util
import os
import sys
import time
import traceback

from .channel import FrameChannel
from .frames import (
    ANSWER_IN_REGION,
    ERROR,
    RESULT,
    decode,
    encode,
    open_shared_regions,
    preload_numpy,
)
from .inputs import Input, Output, batch_key


def load_handler(model_dir, entry_point, handler_name):
    sys.path.insert(0, model_dir)
    if entry_point.endswith(".py"):
        path = os.path.join(model_dir, entry_point)
        spec = importlib.util.spec_from_file_location("model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        # A module name, as DJL Serving takes it: from the model's folder or an installed package.
        module = importlib.import_module(entry_point)
    handler = getattr(module, handler_name, None)
    if handler is None:
        raise AttributeError("%s has no function %s" % (entry_point, handler_name))
    return handler


def handle_call(handler, properties, contents):
    """Runs the handler on one call; returns the result's properties and contents."""
    output = handler(Input(properties, contents))
    if output is None:
        # DJL Serving's answer to a handler that returned nothing.
        output = Output(204, "No content")
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
            output = Output(204, "No content")
        for key, value in output.properties.items():
            props[batch_key(index, key)] = value
        props[batch_key(index, "code")] = output.code
        props[batch_key(index, "message")] = output.message
        for name, value in output.content:
            contents.append((batch_key(index, name), value))
    return props, contents


def _out_of_memory(error):
    name = type(error).__name__
    return name in ("MemoryError", "OutOfMemoryError") or "CUDA error: out of memory" in str(error)


def main():
    model_dir, entry_point, handler_name, device_id = sys.argv[1:5]
    channel = FrameChannel(3, 4)
    region, answers = open_shared_regions(os.environ)
    handler = None
    clock = time.perf_counter
    while True:
        frame = channel.read()
        if frame is None:
            return
        request_id, kind, properties, contents = decode(frame, region)
        answer_region = answers if kind & ANSWER_IN_REGION else None
        # What DJL Serving's engine adds to every call: handlers read them in initialize().
        properties["model_dir"] = model_dir
        properties["device_id"] = device_id
        started = clock()
        try:
            if handler is None:
                handler = load_handler(model_dir, entry_point, handler_name)
                preload_numpy()
            props, out = handle_call(handler, properties, contents)
            props["kiln_handler_us"] = int((clock() - started) * 1e6)
            parts = encode(request_id, RESULT, props, out, answer_region)
        except Exception as error:  # noqa: BLE001 - every handler failure goes back as a frame
            traceback.print_exc(file=sys.stderr)
            message = "%s: %s" % (type(error).__name__, error)
            props = {"message": message}
            if _out_of_memory(error):
                # DJL Serving answers 507 when the handler runs out of (GPU) memory.
                props["code"] = 507
            parts = encode(request_id, ERROR, props, [])
        channel.write(parts)


if __name__ == "__main__":
    main()
