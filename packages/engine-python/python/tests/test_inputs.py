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
        # DJL's answer to the empty call a worker gets at load.
        self.assertIsNone(Input().get_as_bytes())
        with self.assertRaises(ValueError):
            Input().get_as_string()

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

    def test_npy_bodies_decode_like_np_load(self):
        from kiln_python.inputs import _load_npy

        arrays = [
            np.arange(6, dtype=np.float32).reshape(2, 3),
            np.array(3.5),
            np.zeros((0, 4), np.int64),
            np.array([True, False]),
            np.arange(4, dtype=">i4"),
            np.asfortranarray(np.arange(6.0).reshape(2, 3)),
            np.zeros((3,), np.float16),
        ]
        for array in arrays:
            got = _load_npy(npy(array))
            self.assertEqual((got.dtype, got.shape), (array.dtype, array.shape))
            np.testing.assert_array_equal(got, array)
            self.assertTrue(got.flags.writeable)

    def test_image_when_pillow_is_installed(self):
        try:
            from PIL import Image
        except ImportError:
            self.skipTest("Pillow is not installed")
        buffer = io.BytesIO()
        Image.new("RGB", (4, 3), (255, 0, 0)).save(buffer, format="PNG")
        image = Input({}, [("data", buffer.getvalue())]).get_as_image()
        self.assertEqual(image.size, (4, 3))


class BatchAndNDListTest(unittest.TestCase):
    def test_get_batches_splits_djl_prefixed_properties_and_contents(self):
        batch = Input(
            {"batch_size": "2", "batch_000_content-type": "text/plain", "batch_001_x": "y"},
            [("batch_000_data", b"first"), ("batch_001_data", b"second")],
        )
        self.assertTrue(batch.is_batch())
        self.assertEqual(batch.get_batch_size(), 2)
        first, second = batch.get_batches()
        self.assertEqual(first.get_as_string(), "first")
        self.assertEqual(first.get_property("Content-Type"), "text/plain")
        self.assertEqual(second.get_as_bytes(), b"second")
        self.assertEqual(second.get_properties(), {"x": "y"})

    def test_get_batches_ignores_other_batch_keys(self):
        # serving.properties keys handed to initialize() may start with "batch_" too.
        batch = Input({"batch_size": "1", "batch_timeout": "5", "batch_000_x": "y"}, [])
        (first,) = batch.get_batches()
        self.assertEqual(first.get_properties(), {"x": "y"})

    def test_ndlist_round_trip_and_get_data_by_content_type(self):
        from djl_python.np_util import from_nd_list, to_nd_list

        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.array([True, False])
        raw = to_nd_list([a, b])
        got = Input({"content-type": "tensor/ndlist"}, [("data", raw)]).get_data()
        np.testing.assert_array_equal(got[0], a)
        np.testing.assert_array_equal(got[1], b)
        self.assertEqual(from_nd_list(raw)[0].dtype, np.float32)
        with self.assertRaises(ValueError):
            from_nd_list(b"not an ndlist")
        text = Input({"Content-Type": "text/plain"}, [("data", b"hi")])
        self.assertEqual(text.get_data(), "hi")


class OutputTest(unittest.TestCase):
    def test_batch_index_prefixes_keys_and_properties(self):
        out = Output().add_as_json({"i": 0}, batch_index=0).add("x", key="t", batch_index=1)
        self.assertEqual([name for name, _ in out.content], ["batch_000_data", "batch_001_t"])
        self.assertEqual(out.properties["batch_000_content-type"], "application/json")
        self.assertEqual(Output().add({"a": np.int64(3)}).content.value_at(0), b'{"a": 3}')

    def test_code_message_properties_and_contents(self):
        out = Output().set_code(201).set_message("Created").add_property("X-A", 1)
        out.add("text").add(b"bytes", key="b").add_as_json({"k": 1}, key="j")
        self.assertEqual((out.code, out.message), (201, "Created"))
        self.assertEqual(out.properties["X-A"], "1")
        self.assertEqual(out.properties["content-type"], "application/json")
        self.assertEqual([name for name, _ in out.content], ["data", "b", "j"])
        self.assertEqual(json.loads(out.content.value_at(2)), {"k": 1})

    def test_numpy_as_raw_tensors_and_npz_as_np_savez(self):
        a = np.ones((2, 2), dtype=np.float32)
        out = Output().add_as_numpy([a, a * 2])
        self.assertEqual([name for name, _ in out.content], ["data0", "data1"])
        np.testing.assert_array_equal(out.content.value_at(1), a * 2)
        npz = Output().add_as_npz([a, a * 2])
        self.assertEqual(npz.properties["content-type"], "tensor/npz")
        with np.load(io.BytesIO(npz.content.value_at(0))) as loaded:
            self.assertEqual(loaded.files, ["arr_0", "arr_1"])
            np.testing.assert_array_equal(loaded["arr_1"], a * 2)


if __name__ == "__main__":
    unittest.main()
