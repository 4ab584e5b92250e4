"""djl_python's public API as DJL Serving's handlers use it: names, defaults and behaviour
(run by src/python-api.test.ts with /usr/bin/python3)."""
import inspect
import io
import json
import os
import struct
import tempfile
import time
import unittest

import numpy as np

import djl_python
from djl_python import Input, Output, PairList, Session, SessionManager
from djl_python.inputs import Input as InputFromModule
from djl_python.np_util import from_nd_list, to_nd_list
from djl_python.outputs import Output as OutputFromModule
from djl_python.session_manager import SessionManager as SessionManagerFromModule
from kiln_python.inputs import as_output

# Every public signature of DJL's djl_python (parameters in order, with their defaults). Kiln's
# may add keyword parameters after them, never rename or reorder them.
NO_DEFAULT = inspect.Parameter.empty
DJL_SIGNATURES = {
    Input: {
        "get_function_name": [],
        "get_properties": [],
        "get_property": [("key", NO_DEFAULT)],
        "get_content": [],
        "contains_key": [("key", NO_DEFAULT)],
        "is_batch": [],
        "get_batch_size": [],
        "get_batches": [],
        "is_empty": [],
        "get_data": [("key", None)],
        "get_as_bytes": [("key", None)],
        "get_as_string": [("key", None)],
        "get_as_json": [("key", None)],
        "get_as_image": [("key", None)],
        "get_as_numpy": [("key", None)],
        "get_as_npz": [("key", None)],
        "get_as_csv": [("key", None)],
    },
    Output: {
        "__init__": [("code", 200), ("message", "OK")],
        "set_code": [("code", NO_DEFAULT)],
        "set_message": [("message", NO_DEFAULT)],
        "error": [("error", NO_DEFAULT), ("code", 424), ("message", "prediction failure")],
        "add_property": [("key", NO_DEFAULT), ("val", NO_DEFAULT)],
        "get_properties": [],
        "get_property": [("key", NO_DEFAULT)],
        "add": [("value", NO_DEFAULT), ("key", None), ("batch_index", None)],
        "add_as_json": [("val", NO_DEFAULT), ("key", None), ("batch_index", None)],
        "add_as_numpy": [("np_list", NO_DEFAULT), ("key", None), ("batch_index", None)],
        "add_as_npz": [("np_list", NO_DEFAULT), ("key", None), ("batch_index", None)],
        "finalize": [("finalize_function", NO_DEFAULT), ("args", NO_DEFAULT)],
        "execute_finalize": [],
    },
    PairList: {
        "__init__": [("keys", None), ("values", None), ("pair_list", None), ("pair_map", None)],
        "add": [("key", None), ("value", None), ("index", None), ("pair", None)],
        "add_all": [("other", NO_DEFAULT)],
        "size": [],
        "is_empty": [],
        "get": [("key", NO_DEFAULT)],
        "key_at": [("index", NO_DEFAULT)],
        "value_at": [("index", NO_DEFAULT)],
        "get_keys": [],
        "get_values": [],
    },
    SessionManager: {
        "__init__": [("properties", NO_DEFAULT)],
        "create_session": [],
        "get_session": [("session_id", NO_DEFAULT)],
        "close_session": [("session_id", NO_DEFAULT)],
    },
    Session: {
        "__init__": [("session_id", NO_DEFAULT), ("session_root", NO_DEFAULT)],
        "put": [("key", NO_DEFAULT), ("value", NO_DEFAULT)],
        "get": [("key", NO_DEFAULT), ("d", None)],
        "get_as_numpy": [
            ("key", NO_DEFAULT),
            ("shape", NO_DEFAULT),
            ("dtype", np.float32),
            ("create", False),
        ],
        "remove": [],
    },
}


def djl_python_ndlist(arrays):
    """An ndlist as DJL's Python encoder writes it: sparse format `default`, numpy's upper-cased
    dtype name (BOOL for booleans), a `?` layout per dimension."""
    def utf(text):
        return struct.pack(">h", len(text)) + text.encode()

    out = struct.pack(">i", len(arrays))
    for a in arrays:
        out += utf("NDAR") + struct.pack(">i", 3) + b"\0" + utf("default")
        out += utf(str(a.dtype).upper())
        out += struct.pack(">i", a.ndim) + b"".join(struct.pack(">q", d) for d in a.shape)
        out += struct.pack(">i", a.ndim) + b"".join(struct.pack(">h", ord("?")) for _ in a.shape)
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        out += b"<" + struct.pack(">i", len(data)) + data
    return out


class SignatureTest(unittest.TestCase):
    def test_every_djl_signature_is_kilns(self):
        for cls, methods in DJL_SIGNATURES.items():
            for method, expected in methods.items():
                params = list(inspect.signature(getattr(cls, method)).parameters.values())[1:]
                got = [(p.name, p.default) for p in params[: len(expected)]]
                where = "%s.%s" % (cls.__name__, method)
                self.assertEqual([n for n, _ in got], [n for n, _ in expected], where)
                for (name, default), (_, want) in zip(got, expected):
                    if name == "dtype":
                        self.assertEqual(np.dtype(default), np.dtype(want), where)
                    else:
                        self.assertEqual(default, want, "%s(%s)" % (where, name))
                for extra in params[len(expected) :]:
                    self.assertIsNot(extra.default, NO_DEFAULT, "%s(%s)" % (where, extra.name))

    def test_djl_module_names(self):
        self.assertIs(InputFromModule, Input)
        self.assertIs(OutputFromModule, Output)
        self.assertIs(SessionManagerFromModule, djl_python.SessionManager)
        self.assertEqual(list(inspect.signature(to_nd_list).parameters), ["np_list"])


class InputTest(unittest.TestCase):
    def test_the_empty_load_call(self):
        empty = Input({"model_dir": "/m", "handler": "handle"})
        self.assertTrue(empty.is_empty())
        self.assertIsNone(empty.get_as_bytes())
        self.assertIsNone(empty.get_data())
        self.assertEqual(empty.get_function_name(), "handle")
        self.assertIsNone(Input().get_function_name())

    def test_content_is_a_pair_list(self):
        inputs = Input({}, [("a", b"1"), ("data", b"2"), ("a", b"3")])
        content = inputs.get_content()
        self.assertIsInstance(content, PairList)
        self.assertEqual(content.get_keys(), ["a", "data", "a"])
        self.assertEqual(content.get("a"), b"1")
        self.assertEqual(inputs.get_as_bytes(), b"2")
        self.assertEqual(inputs.get_as_bytes("a"), b"1")
        self.assertTrue(inputs.contains_key("a"))
        self.assertFalse(inputs.contains_key("b"))
        with self.assertRaisesRegex(KeyError, "key:b is not found"):
            inputs.get_as_bytes("b")
        # Without data, the first content.
        self.assertEqual(Input({}, [("x", b"first"), ("y", b"")]).get_as_string(), "first")

    def test_numpy_from_djl_pythons_ndlist_with_bool(self):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.array([[True, False]])
        got = Input({"content-type": "tensor/ndlist"}, [("data", djl_python_ndlist([a, b]))])
        x, y = got.get_data()
        np.testing.assert_array_equal(x, a)
        self.assertEqual((y.dtype, y.shape), (np.bool_, (1, 2)))
        np.testing.assert_array_equal(y, b)


class NpUtilTest(unittest.TestCase):
    def test_round_trip_names_booleans_boolean_and_reads_npz(self):
        arrays = [np.arange(4, dtype=np.int64), np.array([True, False]), np.zeros((0, 2), "<f2")]
        raw = to_nd_list(arrays)
        self.assertIn(b"BOOLEAN", raw)
        for got, want in zip(from_nd_list(raw), arrays):
            self.assertEqual((got.dtype, got.shape), (want.dtype, want.shape))
            np.testing.assert_array_equal(got, want)
        # One array is a list of one, as in DJL.
        self.assertEqual(len(from_nd_list(to_nd_list(arrays[0]))), 1)
        buffer = io.BytesIO()
        np.savez(buffer, arrays[0])
        np.testing.assert_array_equal(from_nd_list(buffer.getvalue())[0], arrays[0])


class PairListTest(unittest.TestCase):
    def test_djl_semantics(self):
        pairs = PairList(keys=["a", "b"], values=[1, 2])
        self.assertEqual((pairs.size(), pairs.key_at(1), pairs.value_at(1)), (2, "b", 2))
        pairs.add("c", 3, index=0)
        pairs.add(pair=("d", 4))
        pairs.add(key="skipped")  # no value: nothing added
        self.assertEqual(pairs.get_keys(), ["c", "a", "b", "d"])
        self.assertEqual(pairs.get_values(), [3, 1, 2, 4])
        self.assertIsNone(pairs.get("z"))
        other = PairList(pair_map={"e": 5})
        pairs.add_all(other)
        self.assertEqual(list(pairs)[-1], ("e", 5))
        self.assertEqual(PairList(pair_list=[("x", 1)]).get("x"), 1)
        self.assertTrue(PairList().is_empty())
        with self.assertRaises(ValueError):
            PairList(keys=["a"], values=[])


class OutputTest(unittest.TestCase):
    def test_djl_keyword_names(self):
        a = np.ones(3, np.float32)
        out = Output().add_as_numpy(np_list=[a], key="y").add_as_json(val={"k": 1}, key="j")
        out.add_property(key="x-a", val=1)
        self.assertEqual(out.content.get_keys(), ["y", "j"])
        self.assertEqual(out.get_properties()["x-a"], "1")
        self.assertEqual(out.get_property("X-A"), "1")
        npz = Output().add_as_npz(np_list=[a])
        self.assertEqual(npz.get_property("Content-Type"), "tensor/npz")
        # One array alone, as DJL's to_nd_list takes it.
        np.testing.assert_array_equal(Output().add_as_numpy(a).content.value_at(0), a)

    def test_error_is_djls_json_body(self):
        out = Output().error("boom")
        self.assertEqual(out.code, 424)
        self.assertIn("boom", out.message)
        self.assertEqual(out.get_property("content-type"), "application/json")
        body = json.loads(out.content.value_at(0))
        self.assertEqual(body, {"code": 424, "message": "prediction failure", "error": "boom"})
        with self.assertRaises(ValueError):
            Output().add_as_json(float("nan"))
        self.assertEqual(Output().add_as_json("é").content.value_at(0), '"é"'.encode())

    def test_finalize_runs_its_function_with_its_arguments(self):
        seen = []
        out = Output().finalize(lambda *args: seen.append(args), 1, "two")
        self.assertEqual(seen, [])
        out.execute_finalize()
        self.assertEqual(seen, [(1, "two")])
        self.assertIsNone(Output().execute_finalize())

    def test_results_other_than_an_output_as_djls_engine_answers_them(self):
        self.assertEqual((as_output(None).code, as_output(None).message), (204, "No content"))
        out = Output()
        self.assertIs(as_output(out), out)
        for result in ("text", b"bytes", {"a": 1}):
            answer = as_output(result)
            self.assertEqual(answer.code, 424)
            body = json.loads(answer.content.value_at(0))
            self.assertEqual(body["error"], "Invalid output type: %s" % type(result))


class SessionManagerTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.manager = SessionManager({"sessions_path": self.root, "sessions_expiration": "60"})

    def test_create_get_put_close(self):
        session = self.manager.create_session()
        self.assertRegex(session.session_id, "^[0-9a-f-]{36}$")
        session.put("history/turns", [1, 2])
        again = self.manager.get_session(session.session_id)
        self.assertEqual(again.get("history/turns"), [1, 2])
        self.assertEqual(again.get("missing", "d"), "d")
        kv = again.get_as_numpy("kv", (2, 3), create=True)
        kv[1, 2] = 7
        kv.flush()
        self.assertEqual(session.get_as_numpy("kv", (2, 3))[1, 2], 7)
        self.manager.close_session(session.session_id)
        self.assertIsNone(self.manager.get_session(session.session_id))
        with self.assertRaisesRegex(ValueError, "invalid session_id"):
            self.manager.get_session("../etc")

    def test_expired_sessions_go_when_a_session_is_made(self):
        old = self.manager.create_session()
        old.put(".creation_time", time.time() - 61)
        fresh = self.manager.create_session()
        self.assertIsNone(self.manager.get_session(old.session_id))
        self.assertEqual(sorted(os.listdir(self.root)), [fresh.session_id])


if __name__ == "__main__":
    unittest.main()
