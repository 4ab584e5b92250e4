"""One Kiln Python worker: loads model.py, then answers framed calls (see frames.py) read from
fd 3 with frames written to fd 4, one call at a time, with a blocking read between calls."""

import importlib.util
import os
import signal
import sys
import time
import traceback

from .channel import FrameChannel
from .frames import (
    ANSWER_IN_REGION,
    ERROR,
    RESULT,
    AnswerTooLarge,
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


def handle_call(handler, properties, contents, model_properties):
    """Runs the handler on one call: the init call (properties a dict), or requests (a list of
    [properties, number of contents], their contents in order). Returns the answer's properties
    (`answers`: [properties, number of contents] per request) and contents."""
    if isinstance(properties, dict):
        # Its answer is not used: the call only loads the handler.
        properties.update(model_properties)
        handler(Input(properties, contents))
        return {}, []
    output = handler(_input_of(properties, contents, model_properties))
    if isinstance(output, (list, tuple)):
        # Kiln's shorthand: one Output per request.
        answers = [_answer(item) for item in output]
    elif len(properties) == 1:
        answers = [_answer(output)]
    else:
        answers = _split_batch(_answer(output), len(properties))
    props = {"answers": [[answer, len(out)] for answer, out in answers]}
    return props, [content for _, out in answers for content in out]


def _input_of(requests, contents, model_properties):
    """DJL's Input of a call: a request's own, or a batch's, whose properties and contents are
    prefixed batch_NNN_ per request (get_batches() splits them back)."""
    if len(requests) == 1:
        return Input({**requests[0][0], **model_properties}, contents)
    properties = {"batch_size": str(len(requests)), **model_properties}
    batch = []
    at = 0
    for index, (props, count) in enumerate(requests):
        for key, value in props.items():
            properties[batch_key(index, key)] = value
        batch += [(batch_key(index, name), value) for name, value in contents[at : at + count]]
        at += count
    return Input(properties, batch)


def _answer(output):
    """An Output as (properties with its code and message, contents)."""
    if output is None:
        # DJL Serving's answer to a handler that returned nothing.
        output = Output(204, "No content")
    props = dict(output.properties)
    props["code"] = output.code
    props["message"] = output.message
    return props, list(output.content)


def _split_batch(answer, size):
    """A batch's one Output, split by its batch_NNN_ prefixes; unprefixed properties (its code
    and message among them) go to every request."""
    props, contents = answer
    answers = [({}, []) for _ in range(size)]
    shared = {}
    for key, value in props.items():
        index = _batch_index(key)
        if index is None:
            shared[key] = value
        elif index < size:
            answers[index][0][key[10:]] = value
    for name, value in contents:
        index = _batch_index(name)
        if index is None:
            raise ValueError(
                "the handler answered a batch with contents not named batch_NNN_ "
                "(use Output.add(..., batch_index=i) or return one Output per request)"
            )
        if index < size:
            answers[index][1].append((name[10:], value))
    return [({**shared, **own}, out) for own, out in answers]


def _batch_index(key):
    if key.startswith("batch_") and key[6:9].isdigit() and key[9:10] == "_":
        return int(key[6:9])
    return None


def _out_of_memory(error):
    name = type(error).__name__
    return name in ("MemoryError", "OutOfMemoryError") or "CUDA error: out of memory" in str(error)


class _Interruptible:
    """Node cancels a running call with SIGINT (its client went away): the handler then gets a
    KeyboardInterrupt. Between calls the signal is ignored, so one that arrives as the answer
    leaves cannot break the worker's read of the next call."""

    def __init__(self):
        self.running = False
        signal.signal(signal.SIGINT, self._interrupt)

    def _interrupt(self, signum, frame):
        if self.running:
            raise KeyboardInterrupt


def _rss_reader():
    """A function giving this process's resident memory in bytes."""
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    try:
        statm = open("/proc/self/statm", "rb", buffering=0)
    except OSError:
        import resource

        # Not Linux: the peak instead (macOS reports it in bytes).
        return lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    def current():
        statm.seek(0)
        return int(statm.read().split()[1]) * page

    return current


def _positive_int(environ, key):
    value = int(environ.get(key) or 0)
    return value if value > 0 else None


def _pin_to_cores(environ):
    """Core pinning (cpu_launcher_enable): before the handler imports torch or numpy, so their
    OpenMP threads inherit the mask; OMP_NUM_THREADS is already the number of cores."""
    cores = environ.get("KILN_CPU_CORES")
    if not cores:
        return
    try:
        os.sched_setaffinity(0, {int(core) for core in cores.split(",")})
    except (AttributeError, OSError, ValueError) as error:
        # Node reads the mask back and reports the worker unpinned.
        print(f"cannot pin to cores {cores}: {error}", file=sys.stderr, flush=True)


def main():
    model_dir, entry_point, handler_name, device_id = sys.argv[1:5]
    _pin_to_cores(os.environ)
    channel = FrameChannel(3, 4)
    region, answers = open_shared_regions(os.environ)
    # Bytes one request's answer may hold (max_response_size); a batch's answer, that many times
    # its requests.
    answer_limit = _positive_int(os.environ, "KILN_MAX_RESPONSE_BYTES")
    # Node retires this worker once its memory passes max_worker_rss_mb: every answer says it.
    rss = _rss_reader() if os.environ.get("KILN_REPORT_RSS") == "1" else None
    interruptible = _Interruptible()
    # What DJL Serving's engine adds to every call: handlers read them in initialize().
    model_properties = {"model_dir": model_dir, "device_id": device_id}
    handler = None
    clock = time.perf_counter
    while True:
        frame = channel.read()
        if frame is None:
            return
        request_id, kind, properties, contents = decode(frame, region)
        answer_region = answers if kind & ANSWER_IN_REGION else None
        requests = len(properties) if isinstance(properties, list) else 1
        limit = answer_limit and answer_limit * requests
        started = clock()
        try:
            if handler is None:
                handler = load_handler(model_dir, entry_point, handler_name)
                preload_numpy()
            interruptible.running = True
            try:
                props, out = handle_call(handler, properties, contents, model_properties)
            finally:
                interruptible.running = False
            props["kiln_handler_us"] = int((clock() - started) * 1e6)
            if rss:
                props["kiln_rss_bytes"] = rss()
            parts = encode(request_id, RESULT, props, out, answer_region, limit)
        except KeyboardInterrupt:
            parts = _error(request_id, {"message": "cancelled", "kiln_cancelled": True}, rss)
        except AnswerTooLarge as error:
            # The answer is dropped here, so it never reaches Node's memory.
            parts = _error(request_id, {"message": str(error), "code": 507}, rss)
        except Exception as error:  # noqa: BLE001 - every handler failure goes back as a frame
            traceback.print_exc(file=sys.stderr)
            message = "%s: %s" % (type(error).__name__, error)
            props = {"message": message}
            if _out_of_memory(error):
                # DJL Serving answers 507 when the handler runs out of (GPU) memory.
                props["code"] = 507
            parts = _error(request_id, props, rss)
        channel.write(parts)
        # Not kept while waiting for the next call: a refused answer may be large.
        parts = props = out = None


def _error(request_id, props, rss):
    if rss:
        props["kiln_rss_bytes"] = rss()
    return encode(request_id, ERROR, props, [])


if __name__ == "__main__":
    main()
