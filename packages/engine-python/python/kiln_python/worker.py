"""One Kiln Python worker: loads model.py, then answers framed calls (see frames.py) read from
fd 3 with frames written to fd 4, one call at a time, with a blocking read between calls."""

import importlib.util
import os
import signal
import sys
import time
import traceback

from .channel import FrameChannel
from .rolling import STEPS
from .frames import (
    ACK,
    ANSWER_IN_REGION,
    CHUNK,
    ERROR,
    RESULT,
    AnswerTooLarge,
    decode,
    encode,
    open_shared_regions,
    preload_numpy,
)
from .inputs import Input, Output, _default_stream_output_formatter, as_output, batch_key


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


def handle_call(handler, properties, contents, model_properties, outputs=None):
    """Runs the handler on one call: the init call (properties a dict), or requests (a list of
    [properties, number of contents], their contents in order). Returns the answer's properties
    (`answers`: [properties, number of contents] per request) and contents; the Outputs it
    answered with are appended to `outputs` (their finalize functions run once it is sent)."""
    if isinstance(properties, dict):
        if STEPS.handles(properties):
            # A step worker's call (option.rolling_batch): its handler is stepped.
            return STEPS.call(handler, properties, model_properties)
        # Its answer is not used: the call only loads the handler.
        properties.update(model_properties)
        handler(Input(properties, contents))
        return {}, []
    # What DJL's engine makes of the result: an Output, or 204 for None, or a 424 naming the
    # type of anything else (Kiln also takes a list of Outputs, one per request).
    output = as_output(handler(_input_of(properties, contents, model_properties)))
    if isinstance(output, (list, tuple)):
        output = [as_output(item) for item in output]
        if outputs is not None:
            outputs.extend(output)
        answers = [_answer(item) for item in output]
    else:
        if outputs is not None:
            outputs.append(output)
        if len(properties) == 1:
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
    leaves cannot break the worker's read of the next call; while a streamed answer's chunk is
    written it is held, and raised once the chunk has gone whole."""

    def __init__(self):
        self.running = False
        self.held = False
        signal.signal(signal.SIGINT, self._interrupt)

    def _interrupt(self, signum, frame):
        if self.running:
            raise KeyboardInterrupt
        self.held = True

    def start(self):
        self.held = False
        self.running = True

    def write_whole(self, channel, parts):
        self.running = False
        try:
            channel.write(parts)
        finally:
            self.running = True
        if self.held:
            self.held = False
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
    model_properties = {"model_dir": model_dir, "device_id": device_id, "handler": handler_name}
    handler = None
    clock = time.perf_counter
    while True:
        frame = channel.read()
        if frame is None:
            return
        request_id, kind, properties, contents = decode(frame, region)
        if kind == ACK:
            # Of a chunk whose call was cancelled as Node sent it.
            continue
        answer_region = answers if kind & ANSWER_IN_REGION else None
        requests = len(properties) if isinstance(properties, list) else 1
        limit = answer_limit and answer_limit * requests
        started = clock()
        outputs = []
        try:
            if handler is None:
                handler = load_handler(model_dir, entry_point, handler_name)
                preload_numpy()
            interruptible.start()
            try:
                props, out = handle_call(handler, properties, contents, model_properties, outputs)
                streamed = _streamed(outputs, requests)
                if streamed:
                    _send_stream(channel, interruptible, request_id, props, streamed, answer_limit)
            finally:
                interruptible.running = False
            props["kiln_handler_us"] = int((clock() - started) * 1e6)
            if rss:
                props["kiln_rss_bytes"] = rss()
            parts = encode(request_id, RESULT, props, out, answer_region, limit)
        except KeyboardInterrupt:
            outputs = None
            parts = _error(request_id, {"message": "cancelled", "kiln_cancelled": True}, rss)
        except AnswerTooLarge as error:
            outputs = None
            # The answer is dropped here, so it never reaches Node's memory.
            parts = _error(request_id, {"message": str(error), "code": 507}, rss)
        except Exception as error:  # noqa: BLE001 - every handler failure goes back as a frame
            traceback.print_exc(file=sys.stderr)
            outputs = None
            message = "%s: %s" % (type(error).__name__, error)
            props = {"message": message}
            if _out_of_memory(error):
                # DJL Serving answers 507 when the handler runs out of (GPU) memory.
                props["code"] = 507
            parts = _error(request_id, props, rss)
        channel.write(parts)
        _finalize(outputs)
        # Not kept while waiting for the next call: a refused answer may be large.
        parts = props = out = outputs = None


def _streamed(outputs, requests):
    """The Output whose answer streams, if there is one; only a call of one request may."""
    streamed = [output for output in outputs if output.stream_content is not None]
    if not streamed:
        return None
    if requests != 1 or len(outputs) != 1:
        raise ValueError("a streamed answer (add_stream_content) answers one request, not a batch")
    return streamed[0]


def _send_stream(channel, interruptible, request_id, props, output, limit):
    """Sends each item of the Output's stream as a chunk frame, the first with the answer's
    properties, waiting for Node's ack of each before the next; the generator is closed however
    it ends (a cancel interrupts the wait or the generator itself). The result frame follows,
    its answer marked kiln_streamed."""
    head = props["answers"][0][0]
    head["kiln_streamed"] = True
    default_format = output.stream_output_formatter is _default_stream_output_formatter
    if default_format and output.get_property("content-type") is None:
        # DJL's default formatter writes JSON lines.
        head["content-type"] = "application/jsonlines"
    stream = iter(output.stream_content)
    first = True
    try:
        for item in stream:
            chunk = output.stream_chunk(item)
            props = head if first else {}
            parts = encode(request_id, CHUNK, props, [("data", chunk)], None, limit)
            interruptible.write_whole(channel, parts)
            first = False
            _await_ack(channel, request_id)
    finally:
        close = getattr(stream, "close", None)
        if close:
            close()


def _await_ack(channel, request_id):
    frame = channel.read()
    if frame is None:
        raise EOFError("Node closed the channel during a stream")
    ack_id, kind, _, _ = decode(frame)
    if kind != ACK or ack_id != request_id:
        raise ValueError("expected the ack of a chunk, got a frame of kind %d" % kind)


def _finalize(outputs):
    """Runs the finalize function of each Output answered (none when the call failed), as DJL
    does once the answer has gone."""
    for output in outputs or ():
        try:
            output.execute_finalize()
        except Exception:  # noqa: BLE001 - the answer is sent: a failure here is only logged
            traceback.print_exc(file=sys.stderr)


def _error(request_id, props, rss):
    if rss:
        props["kiln_rss_bytes"] = rss()
    return encode(request_id, ERROR, props, [])


if __name__ == "__main__":
    main()
