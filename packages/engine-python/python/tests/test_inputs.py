"""Input/Output as handlers see them (run by src/python-api.test.ts with /usr/bin/python3)."""
import io
import json
import unittest

import numpy as np

from djl_python import Input, Output


def npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


class InputTest(unittest.TestCase):
    def test_bytes_string_json_and_properties(self):
        inputs = Input({"content-type": "application/json"}, [("data", b'{"a": [1, 2]}')])
        self.assertFalse(inputs.is_empty())
        self.assertEqual(inputs.get_as_bytes(), b'{"a": [1, 2]}')
        self.assertEqual(inputs.get_as_string("data"), '{"a": [1, 2]}')
        self.assertEqual(inputs.get_as_json(), {"a": [1, 2]})
        self.assertEqual(inputs.get_property("content-type"), "application/json")
        self.assertEqual(inputs.get_properties(), {"content-type": "application/json"})
        self.assertTrue(Input().is_empty())
        self.assertFalse(inputs.is_batch())
        self.assertEqual(inputs.get_batches(), [inputs])
        with self.assertRaises(KeyError):
            inputs.get_as_bytes("missing")
        with self.assertRaises(ValueError):
            Input().get_as_bytes()

    def test_numpy_from_npy_npz_and_raw_tensors(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.array([1, 2], dtype=np.int64)
        np.testing.assert_array_equal(Input({}, [("data", npy(a))]).get_as_numpy("data")[0], a)
        buffer = io.BytesIO()
        np.savez(buffer, a, b)
        got = Input({}, [("data", buffer.getvalue())]).get_as_npz()
        np.testing.assert_array_equal(got[0], a)
        np.testing.assert_array_equal(got[1], b)
        raw = Input({}, [("x", a), ("y", b)]).get_as_numpy()
        self.assertEqual(len(raw), 2)
        np.testing.assert_array_equal(raw[1], b)

    def test_image_when_pillow_is_installed(self):
        try:
            from PIL import Image
        except ImportError:
            self.skipTest("Pillow is not installed")
        buffer = io.BytesIO()
        Image.new("RGB", (4, 3), (255, 0, 0)).save(buffer, format="PNG")
        image = Input({}, [("data", buffer.getvalue())]).get_as_image()
        self.assertEqual(image.size, (4, 3))


class OutputTest(unittest.TestCase):
    def test_code_message_properties_and_contents(self):
        out = Output().set_code(201).set_message("Created").add_property("X-A", 1)
        out.add("text").add(b"bytes", key="b").add_as_json({"k": 1}, key="j")
        self.assertEqual((out.code, out.message), (201, "Created"))
        self.assertEqual(out.properties["X-A"], "1")
        self.assertEqual(out.properties["content-type"], "application/json")
        self.assertEqual([name for name, _ in out.content], ["data", "b", "j"])
        self.assertEqual(json.loads(out.content[2][1]), {"k": 1})

    def test_numpy_as_raw_tensors_and_npz_as_np_savez(self):
        a = np.ones((2, 2), dtype=np.float32)
        out = Output().add_as_numpy([a, a * 2])
        self.assertEqual([name for name, _ in out.content], ["data0", "data1"])
        np.testing.assert_array_equal(out.content[1][1], a * 2)
        npz = Output().add_as_npz([a, a * 2])
        self.assertEqual(npz.properties["content-type"], "tensor/npz")
        with np.load(io.BytesIO(npz.content[0][1])) as loaded:
            self.assertEqual(loaded.files, ["arr_0", "arr_1"])
            np.testing.assert_array_equal(loaded["arr_1"], a * 2)


if __name__ == "__main__":
    unittest.main()
