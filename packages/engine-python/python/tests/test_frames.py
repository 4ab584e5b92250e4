"""The worker's frames and channel (run by src/python-api.test.ts with /usr/bin/python3)."""
import os
import socket
import threading
import unittest

import numpy as np

from kiln_python.channel import FrameChannel, _write_rest
import struct

from kiln_python.frames import CALL, RESULT, SHARED_CONTENTS, AnswerTooLarge, decode, encode


def joined(parts):
    return bytearray(b"".join(memoryview(part).tobytes() for part in parts))


class FramesTest(unittest.TestCase):
    def test_answer_over_its_limit_is_refused_before_encoding(self):
        contents = [("a", b"x" * 100), ("b", np.zeros(25, np.float32))]
        with self.assertRaisesRegex(AnswerTooLarge, "holds 202 bytes.*max_response_size"):
            encode(1, RESULT, {}, contents, limit=201)
        self.assertGreater(len(joined(encode(1, RESULT, {}, contents, limit=202))), 202)

    def test_round_trip(self):
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        contents = [("raw", b"odd"), ("x", x), ("empty", np.zeros((0, 4), np.int64))]
        request_id, kind, props, got = decode(joined(encode(9, RESULT, {"a": "b"}, contents)))
        self.assertEqual((request_id, kind, props), (9, RESULT, {"a": "b"}))
        self.assertEqual(got[0], ("raw", b"odd"))
        np.testing.assert_array_equal(got[1][1], x)
        self.assertEqual(got[1][1].dtype, np.float32)
        self.assertEqual(got[2][1].shape, (0, 4))

    def test_tensors_are_aligned_writable_views(self):
        frame = joined(encode(1, CALL, {}, [("n", b"12345"), ("x", np.ones(3, np.float64))]))
        _, _, props, contents = decode(frame)
        self.assertEqual(props, {})
        x = contents[1][1]
        self.assertTrue(np.shares_memory(x, np.frombuffer(frame, np.uint8)))
        self.assertEqual(x.ctypes.data % 8, (np.frombuffer(frame, np.uint8).ctypes.data) % 8)
        x[0] = 5  # the handler may change its input in place
        self.assertEqual(x[0], 5)

    def test_non_contiguous_and_big_endian_arrays(self):
        a = np.arange(12, dtype=">i4").reshape(3, 4)[:, ::2]
        _, _, _, contents = decode(joined(encode(1, RESULT, {}, [("a", a)])))
        np.testing.assert_array_equal(contents[0][1], a)
        self.assertEqual(contents[0][1].dtype, np.int32)


def located_call(name, dtype, shape, size, at):
    """A call as Node writes it when a content waits in the shared input region."""
    content = struct.pack("<H", len(name)) + name + bytes([len(dtype)]) + dtype
    content += bytes([len(shape)]) + struct.pack("<%dq" % len(shape), *shape)
    content += struct.pack("<Q", size) + b"\x01" + struct.pack("<Q", at)
    body = b"{}" + struct.pack("<H", 1) + content
    return bytearray(struct.pack("<IIBI", 9 + len(body), 5, CALL | SHARED_CONTENTS, 2) + body)


class SharedInputTest(unittest.TestCase):
    def test_contents_in_the_region_are_copied_out(self):
        region = bytearray(256)
        x = np.arange(6, dtype=np.float32)
        region[64:88] = x.tobytes()
        region[128:131] = b"abc"
        request_id, kind, _, contents = decode(
            located_call(b"x", b"float32", (2, 3), 24, 64), memoryview(region)
        )
        self.assertEqual((request_id, kind), (5, CALL))
        np.testing.assert_array_equal(contents[0][1], x.reshape(2, 3))
        region[64:88] = bytes(24)  # the next call's bytes
        np.testing.assert_array_equal(contents[0][1], x.reshape(2, 3))
        _, _, _, contents = decode(located_call(b"raw", b"", (), 3, 128), memoryview(region))
        self.assertEqual(contents[0][1], b"abc")

    def test_a_reference_without_a_region_or_past_its_end_is_refused(self):
        with self.assertRaises(ValueError):
            decode(located_call(b"x", b"", (), 3, 0), None)
        with self.assertRaises(ValueError):
            decode(located_call(b"x", b"", (), 300, 0), memoryview(bytearray(256)))


class ChannelTest(unittest.TestCase):
    def test_frames_cross_a_socket_pair_whole(self):
        ours, theirs = socket.socketpair()
        back_ours, back_theirs = socket.socketpair()
        channel = FrameChannel(theirs.detach(), back_theirs.detach())
        big = np.arange(300_000, dtype=np.float32)  # larger than a socket buffer
        frames = [encode(i, CALL, {"i": i}, [("x", big[: 10**i])]) for i in range(6)]
        replies = []
        received = bytearray()

        def receive():
            while chunk := back_ours.recv(1 << 20):
                received.extend(chunk)

        sender = threading.Thread(target=lambda: [ours.sendall(joined(f)) for f in frames])
        receiver = threading.Thread(target=receive)
        sender.start()
        receiver.start()
        for i in range(6):
            request_id, _, props, contents = decode(channel.read())
            self.assertEqual((request_id, props), (i, {"i": i}))
            np.testing.assert_array_equal(contents[0][1], big[: 10**i])
            replies.append(encode(i, RESULT, {}, contents))
            channel.write(replies[-1])
        sender.join()
        ours.close()
        self.assertIsNone(channel.read())
        os.close(channel._write_fd)
        receiver.join()
        self.assertEqual(received, b"".join(joined(reply) for reply in replies))

    def test_a_cut_short_write_resumes_where_it_stopped(self):
        parts = encode(3, RESULT, {"k": "v"}, [("x", np.arange(5.0)), ("e", np.zeros(0))])
        whole = joined(parts)
        for written in (0, 1, 13, len(whole) - 1):
            reader, writer = os.pipe()
            os.write(writer, whole[:written])
            _write_rest(writer, parts, written)
            os.close(writer)
            with os.fdopen(reader, "rb") as f:
                self.assertEqual(f.read(), whole)


if __name__ == "__main__":
    unittest.main()
