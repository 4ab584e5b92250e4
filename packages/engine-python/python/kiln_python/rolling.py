"""Rolling batch for Python handlers (option.rolling_batch): the worker's side of a step worker.

The handler named by option.handler (default StepHandler) is called once, at load, with the
model's properties, and returns the object Kiln steps: each step admits new requests, feeds
token ids to the active ones and answers, for each feed, the logits of the next token. Kiln
samples from them, detokenizes, streams, and ends a request at the end-of-text token, a stop
string or max_new_tokens, telling the handler in a later step's `finished`.
"""

# Marks the init call of a step worker (Node adds it to the init properties).
STEP_INIT_KEY = "kiln_step_handler"
# Carries a step: {"opens": [id, ...], "feeds": [[id, [token, ...]], ...], "releases": [...]}.
STEP_KEY = "kiln_step"
DESCRIBE_KEY = "kiln_step_describe"


class Feed:
    """Tokens for one request to take in this step: its prompt (or a chunk of it), or the
    token Kiln chose last; the answer is the logits of the token after them."""

    __slots__ = ("request_id", "tokens")

    def __init__(self, request_id, tokens):
        self.request_id = request_id
        self.tokens = tokens

    def __repr__(self):
        return "Feed(%d, %r)" % (self.request_id, self.tokens)


class StepBatch:
    """One step: requests admitted (`new_requests`, their ids), requests that ended since the
    last step (`finished`: free their state), and what to feed (`feeds`, in answer order)."""

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
        batch = StepBatch(step["opens"], step["releases"], feeds)
        logits = self.handler.step(batch)
        return {}, [("logits", _logits_matrix(logits, len(feeds)))]

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


def _logits_matrix(logits, rows):
    """The handler's answer as a float32 [rows, vocab] array: a 2-D array or tensor, or a list
    of 1-D ones (numpy arrays, torch tensors or lists)."""
    import numpy as np

    if isinstance(logits, (list, tuple)):
        logits = [_numpy_of(row) for row in logits]
        matrix = np.stack(logits) if logits else np.zeros((0, 0), np.float32)
    else:
        matrix = _numpy_of(logits)
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != rows:
        raise ValueError(
            "step() must answer one row of logits per feed (%d), not an array of shape %s"
            % (rows, tuple(matrix.shape))
        )
    return matrix


def _numpy_of(value):
    if hasattr(value, "detach"):  # a torch tensor, wherever it lives
        value = value.detach().float().cpu().numpy()
    import numpy as np

    return np.asarray(value, dtype=np.float32)


# One per worker process: a process runs one model's handler.
STEPS = StepHandlerHost()
