"""How a step worker's calls reach the handler's object and its logits go back (run by
src/python-api.test.ts)."""
import unittest

import numpy as np

from kiln_python.rolling import DESCRIBE_KEY, STEP_INIT_KEY, STEP_KEY, StepHandlerHost

MODEL = {"model_dir": "/m", "device_id": "-1"}


class Recorder:
    def __init__(self, properties):
        self.properties = properties
        self.vocab_size = 3
        self.max_sequence_length = 16
        self.batches = []

    def step(self, batch):
        self.batches.append(batch)
        return [np.arange(3, dtype=np.float64) * feed.request_id for feed in batch.feeds]


def started(factory=Recorder):
    worker = StepHandlerHost()
    worker.call(factory, {STEP_INIT_KEY: "true", "max_len": "16"}, MODEL)
    return worker


def step(worker, opens=(), feeds=(), releases=()):
    call = {STEP_KEY: {"opens": list(opens), "feeds": list(feeds), "releases": list(releases)}}
    props, contents = worker.call(None, call, MODEL)
    return contents[0][1]


class StepHandlerHostTest(unittest.TestCase):
    def test_the_init_call_makes_the_handler_with_the_model_properties(self):
        worker = started()
        self.assertEqual(worker.handler.properties, {"max_len": "16", **MODEL})
        props, _ = worker.call(None, {DESCRIBE_KEY: True}, MODEL)
        self.assertEqual(props, {"vocab_size": 3, "max_sequence_length": 16})

    def test_a_step_hands_over_its_requests_and_answers_float32_rows(self):
        worker = started()
        logits = step(worker, opens=[1, 2], feeds=[[1, [5, 6]], [2, [7]]])
        batch = worker.handler.batches[0]
        self.assertEqual(batch.new_requests, [1, 2])
        self.assertEqual(batch.finished, [])
        self.assertEqual([(f.request_id, f.tokens) for f in batch.feeds], [(1, [5, 6]), (2, [7])])
        self.assertEqual(logits.dtype, np.float32)
        self.assertEqual(logits.tolist(), [[0, 1, 2], [0, 2, 4]])
        self.assertEqual(step(worker, releases=[2]).shape, (0, 0))
        self.assertEqual(worker.handler.batches[1].finished, [2])

    def test_an_answer_of_the_wrong_number_of_rows_is_refused(self):
        class Short(Recorder):
            def step(self, batch):
                return np.zeros((1, 3))

        worker = started(Short)
        with self.assertRaisesRegex(ValueError, r"one row of logits per feed \(2\)"):
            step(worker, opens=[1, 2], feeds=[[1, [1]], [2, [1]]])

    def test_a_handler_without_its_vocabulary_size_is_refused(self):
        class Vague(Recorder):
            def __init__(self, properties):
                super().__init__(properties)
                self.vocab_size = None

        worker = started(Vague)
        with self.assertRaisesRegex(ValueError, "vocab_size must be an integer >= 1, not None"):
            worker.call(None, {DESCRIBE_KEY: True}, MODEL)


if __name__ == "__main__":
    unittest.main()
