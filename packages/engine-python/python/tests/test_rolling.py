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


def answering(answer):
    """A handler that answers `answer(batch)`."""

    class Answering(Recorder):
        def step(self, batch):
            return answer(batch)

    return Answering


def started(factory=Recorder):
    worker = StepHandlerHost()
    worker.call(factory, {STEP_INIT_KEY: "true", "max_len": "16"}, MODEL)
    return worker


def step(worker, opens=(), feeds=(), releases=()):
    call = {STEP_KEY: {"opens": list(opens), "feeds": list(feeds), "releases": list(releases)}}
    props, contents = worker.call(None, call, MODEL)
    return dict(contents)


class StepHandlerHostTest(unittest.TestCase):
    def test_the_init_call_makes_the_handler_with_the_model_properties(self):
        worker = started()
        self.assertEqual(worker.handler.properties, {"max_len": "16", **MODEL})
        props, _ = worker.call(None, {DESCRIBE_KEY: True}, MODEL)
        self.assertEqual(props, {"vocab_size": 3, "max_sequence_length": 16})

    def test_a_step_hands_over_its_requests_and_answers_float32_rows(self):
        worker = started()
        answer = step(worker, opens=[[1, {"seed": 3}], [2, {}]], feeds=[[1, [5, 6]], [2, [7]]])
        batch = worker.handler.batches[0]
        opened = [(r.id, r.parameters) for r in batch.new_requests]
        self.assertEqual(opened, [(1, {"seed": 3}), (2, {})])
        self.assertEqual(batch.finished, [])
        self.assertEqual([(f.request_id, f.tokens) for f in batch.feeds], [(1, [5, 6]), (2, [7])])
        self.assertEqual(list(answer), ["tokens", "logits"])
        self.assertEqual(answer["tokens"].tolist(), [-1, -1])
        self.assertEqual(answer["logits"].dtype, np.float32)
        self.assertEqual(answer["logits"].tolist(), [[0, 1, 2], [0, 2, 4]])
        self.assertEqual(step(worker, releases=[2])["tokens"].shape, (0,))
        self.assertEqual(worker.handler.batches[1].finished, [2])

    def test_token_ids_go_back_as_tokens_beside_the_rows_of_logits(self):
        feeds = [[1, [1]], [2, [1]], [3, [1]]]
        mixed = answering(lambda batch: [2, np.float16([1, 0, 0]), np.int64(1)])
        answer = step(started(mixed), opens=[[1, {}], [2, {}], [3, {}]], feeds=feeds)
        self.assertEqual(answer["tokens"].dtype, np.int32)
        self.assertEqual(answer["tokens"].tolist(), [2, -1, 1])
        self.assertEqual(answer["logits"].tolist(), [[1, 0, 0]])
        chosen = answering(lambda batch: np.array([0, 1, 2]))
        answer = step(started(chosen), opens=[[1, {}], [2, {}], [3, {}]], feeds=feeds)
        self.assertEqual(list(answer), ["tokens"])
        self.assertEqual(answer["tokens"].tolist(), [0, 1, 2])
        whole = answering(lambda batch: np.ones((3, 3)))
        answer = step(started(whole), opens=[[1, {}], [2, {}], [3, {}]], feeds=feeds)
        self.assertEqual(list(answer), ["logits"])

    def test_an_answer_for_another_number_of_feeds_is_refused(self):
        opens, feeds = [[1, {}], [2, {}]], [[1, [1]], [2, [1]]]
        with self.assertRaisesRegex(ValueError, r"one row of logits per feed \(2\)"):
            step(started(answering(lambda batch: np.zeros((1, 3)))), opens=opens, feeds=feeds)
        with self.assertRaisesRegex(ValueError, r"one token id or row of logits per feed \(2\)"):
            step(started(answering(lambda batch: [1])), opens=opens, feeds=feeds)

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
