"""How the worker turns a call's requests into DJL's Input and its Output back into one answer
per request (run by src/python-api.test.ts)."""
import unittest

from djl_python import Output
from kiln_python.worker import handle_call

MODEL = {"model_dir": "/m", "device_id": "-1"}


def echo_batch(inputs):
    out = Output()
    for i, item in enumerate(inputs.get_batches()):
        out.add(item.get_as_string(), batch_index=i)
        out.add_property("seen", item.get_property("x-id"), batch_index=i)
    return out


class WorkerTest(unittest.TestCase):
    def test_one_request_is_its_own_input(self):
        seen = []

        def handler(inputs):
            seen.append(inputs)
            return Output().add("ok")

        props, contents = handle_call(handler, [[{"a": "1"}, 1]], [("data", b"x")], MODEL)
        self.assertFalse(seen[0].is_batch())
        self.assertEqual(seen[0].get_properties(), {"a": "1", **MODEL})
        self.assertEqual(props["answers"], [[{"code": 200, "message": "OK"}, 1]])
        self.assertEqual([(n, bytes(v)) for n, v in contents], [("data", b"ok")])

    def test_a_batch_is_prefixed_per_request_and_its_answer_split_back(self):
        requests = [[{"x-id": "a"}, 2], [{"x-id": "b"}, 1]]
        contents = [("q", b"1"), ("data", b"first"), ("data", b"second")]
        props, out = handle_call(echo_batch, requests, contents, MODEL)
        answers = props["answers"]
        self.assertEqual([a[0]["seen"] for a in answers], ["a", "b"])
        self.assertEqual([a[1] for a in answers], [1, 1])
        # get_as_string() of the first request reads its "data", not its query parameter.
        self.assertEqual([bytes(v) for _, v in out], [b"first", b"second"])
        self.assertEqual([n for n, _ in out], ["data", "data"])

    def test_a_batch_failed_as_a_whole_fails_every_request(self):
        def refuse(inputs):
            return Output(503, "busy")

        props, _ = handle_call(refuse, [[{}, 1], [{}, 1]], [("data", b"a"), ("data", b"b")], MODEL)
        self.assertEqual([a[0]["code"] for a in props["answers"]], [503, 503])

    def test_one_output_per_request_and_none(self):
        props, _ = handle_call(lambda inputs: [None, Output().add("b")], [[{}, 1], [{}, 1]],
                               [("data", b"a"), ("data", b"b")], MODEL)
        self.assertEqual([a[0]["code"] for a in props["answers"]], [204, 200])

    def test_unprefixed_contents_in_a_batch_answer_are_refused(self):
        with self.assertRaises(ValueError):
            handle_call(lambda inputs: Output().add("x"), [[{}, 1], [{}, 1]],
                        [("data", b"a"), ("data", b"b")], MODEL)

    def test_a_result_that_is_not_an_output_is_a_424_naming_its_type(self):
        props, contents = handle_call(lambda inputs: "text", [[{}, 1]], [("data", b"x")], MODEL)
        answer = props["answers"][0][0]
        self.assertEqual(answer["code"], 424)
        self.assertIn("Invalid output type: <class 'str'>", bytes(contents[0][1]).decode())

    def test_the_outputs_answered_are_handed_back_for_their_finalize(self):
        done = []
        outputs = []
        output = Output().add("x").finalize(done.append, 1)
        handle_call(lambda inputs: output, [[{}, 1]], [("data", b"x")], MODEL, outputs)
        self.assertEqual(outputs, [output])
        self.assertEqual(done, [])
        outputs[0].execute_finalize()
        self.assertEqual(done, [1])

    def test_a_stream_is_formatted_as_djl_json_lines_or_by_its_formatter(self):
        default = Output().add_stream_content(iter([]))
        self.assertEqual(default.stream_chunk(["a", "b"]), b'{"outputs": ["a", "b"]}\n')
        custom = Output().add_stream_content(iter([]), lambda text: "data: %s\n\n" % text)
        self.assertEqual(custom.stream_chunk("x"), b"data: x\n\n")


if __name__ == "__main__":
    unittest.main()
