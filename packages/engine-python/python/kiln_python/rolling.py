"""Rolling batch for Python handlers (option.rolling_batch): the worker's side of a step worker.

The handler named by option.handler (default StepHandler) is called once, at load, with the
model's properties, and returns the object Kiln steps: each step admits new requests, feeds
token ids to the active ones and answers, for each feed, the next token it chose or the logits
to choose it from (Kiln samples those). Kiln detokenizes, streams, and ends a request at the
end-of-text token, a stop string or max_new_tokens, telling the handler in a later step's
`finished`.
"""

# Marks the init call of a step worker (Node adds it to the init properties).
STEP_INIT_KEY = "kiln_step_handler"
# Carries a step: {"opens": [[id, parameters], ...], "feeds": [[id, [token, ...]], ...],
# "releases": [id, ...]}.
STEP_KEY = "kiln_step"
DESCRIBE_KEY = "kiln_step_describe"


class Request:
    """A request admitted to the batch: its id (feeds and `finished` name it) and its
    generation parameters, DJL's names (do_sample, temperature, top_k, top_p,
    repetition_penalty, seed), those it set."""

    __slots__ = ("id", "parameters")

    def __init__(self, request_id, parameters):
        self.id = request_id
        self.parameters = parameters

    def __repr__(self):
        return "Request(%d, %r)" % (self.id, self.parameters)


class Feed:
    """Tokens for one request to take in this step: its prompt (or a chunk of it), or its
    last token; the answer is the token after them, or its logits."""

    __slots__ = ("request_id", "tokens")

    def __init__(self, request_id, tokens):
        self.request_id = request_id
        self.tokens = tokens

    def __repr__(self):
        return "Feed(%d, %r)" % (self.request_id, self.tokens)


class StepBatch:
    """One step: requests admitted (`new_requests`), ids of requests that ended since the last
    step (`finished`: free their state), and what to feed (`feeds`, in answer order)."""

    __slots__ = ("new_requests", "finished", "feeds")

    def __init__(self, new_requests, finished, feeds):
        self.new_requests = new_requests
        self.finished = finished
        self.feeds = feeds


class StepHandlerHost:
    """Holds the handler's object and answers Node's step calls."""

    def __init__(self):
        self.handler = None

    def handles(self, properties):
        return isinstance(properties, dict) and (
            STEP_INIT_KEY in properties or STEP_KEY in properties or DESCRIBE_KEY in properties
        )

    def call(self, factory, properties, model_properties):
        """Runs one call: the init call (creates the handler's object), a describe call, or a
        step. Returns the answer's properties and contents."""
        if STEP_INIT_KEY in properties:
            init = {k: v for k, v in properties.items() if k != STEP_INIT_KEY}
            init.update(model_properties)
            self.handler = factory(init)
            return {}, []
        if self.handler is None:
            raise RuntimeError("the step handler was not created")
        if DESCRIBE_KEY in properties:
            return self._describe(), []
        step = properties[STEP_KEY]
        feeds = [Feed(request_id, tokens) for request_id, tokens in step["feeds"]]
        opened = [Request(request_id, parameters) for request_id, parameters in step["opens"]]
        answer = self.handler.step(StepBatch(opened, step["releases"], feeds))
        return {}, _contents_of(answer, len(feeds))

    def _describe(self):
        handler = self.handler
        info = {}
        for key in ("vocab_size", "max_sequence_length"):
            value = getattr(handler, key, None)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    "the step handler's %s must be an integer >= 1, not %r" % (key, value)
                )
            info[key] = value
        for key in ("eos_token_id", "cache_bytes_per_token"):
            value = getattr(handler, key, None)
            if value is not None:
                info[key] = int(value)
        return info


def _contents_of(answer, feeds):
    """The handler's answer as contents: `tokens` (int32, one per feed, -1 where it gave logits)
    and `logits` (float32, a row per feed that gave them). It answers a token id (an int) or a
    row of logits per feed, as a list; or, for every feed, a 2-D array or tensor of logits or
    a 1-D one of token ids."""
    import numpy as np

    if isinstance(answer, (list, tuple)):
        items = list(answer)
    else:
        whole = _numpy_of(answer)
        if whole.ndim == 2:
            items = None
        elif whole.ndim == 1 and whole.dtype.kind in "iu":
            items = list(whole)
        else:
            raise ValueError(
                "step() must answer a token id or a row of logits per feed, not an array of "
                "shape %s" % (tuple(whole.shape),)
            )
    if items is None:
        rows = whole
    else:
        if len(items) != feeds:
            raise ValueError(
                "step() must answer one token id or row of logits per feed (%d), not %d"
                % (feeds, len(items))
            )
        tokens = np.full(feeds, -1, np.int32)
        rows = []
        for index, item in enumerate(items):
            value = _numpy_of(item)
            if value.ndim == 0 and value.dtype.kind in "iu":
                tokens[index] = int(value)
            else:
                rows.append(value)
        if not rows:
            return [("tokens", tokens)]
        rows = np.stack(rows)
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    if rows.ndim != 2 or (items is None and rows.shape[0] != feeds):
        raise ValueError(
            "step() must answer one row of logits per feed (%d), not an array of shape %s"
            % (feeds, tuple(rows.shape))
        )
    if items is None:
        return [("logits", rows)]
    return [("tokens", tokens), ("logits", rows)]


def _numpy_of(value):
    """A numpy array of an answer or part of it: numpy's, a torch tensor's (on any device),
    a list or a number."""
    import numpy as np

    if hasattr(value, "detach"):
        value = value.detach()
        if value.is_floating_point():
            value = value.float()
        value = value.cpu().numpy()
    return np.asarray(value)


# One per worker process: a process runs one model's handler.
STEPS = StepHandlerHost()
