"""The worker's two byte streams to Node: frames in on one file descriptor, frames out on
another. Node's child_process hands them over as Unix socket pairs; pipes work too."""

import os
import socket
import stat

from .frames import frame_length

_IOV_MAX = 1024
# Frames from this size on are read into uninitialized memory: zeroing a fresh bytearray costs
# as much as a third of reading the bytes.
_LARGE_FRAME = 64 * 1024


class FrameChannel:
    def __init__(self, read_fd, write_fd):
        self._read_into = _exact_reader(read_fd)
        self._write_fd = write_fd
        self._header = bytearray(4)
        widen_buffers(read_fd, write_fd)

    def read(self):
        """The next frame, length prefix included, in a new buffer of exactly its size (the
        call's tensors are views of it); None at the end of the stream."""
        if not self._read_into(memoryview(self._header)):
            return None
        size = 4 + frame_length(self._header)
        frame = _uninitialized(size) if size >= _LARGE_FRAME else bytearray(size)
        view = memoryview(frame)
        view[:4] = self._header
        if not self._read_into(view[4:]):
            return None
        return frame

    def write(self, parts):
        """Writes an encoded frame's parts, in one writev when the kernel takes them all."""
        written = os.writev(self._write_fd, parts) if len(parts) <= _IOV_MAX else 0
        if written < 4 + frame_length(parts[0]):
            _write_rest(self._write_fd, parts, written)


def _uninitialized(size):
    try:
        import numpy
    except ImportError:
        return bytearray(size)
    return numpy.empty(size, numpy.uint8)


def _write_rest(fd, parts, written):
    """Rare: more parts than one writev takes, or a write a signal cut short. Sends what
    follows the first `written` bytes."""
    views = [_bytes_view(part) for part in parts]
    while views:
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if not views:
            return
        views[0] = views[0][written:]
        written = os.writev(fd, views[:_IOV_MAX])


def _bytes_view(part):
    view = memoryview(part)
    return view.cast("B") if view.nbytes else memoryview(b"")


def _exact_reader(fd):
    """A function filling a memoryview completely from fd (False at the end of the stream):
    one recv with MSG_WAITALL on a socket, a read loop otherwise."""
    if stat.S_ISSOCK(os.fstat(fd).st_mode):
        sock = socket.socket(fileno=fd)
        recv_into = sock.recv_into
        waitall = socket.MSG_WAITALL

        def read_socket(view):
            got = recv_into(view, len(view), waitall)
            while got < len(view):  # interrupted, or the stream ended
                more = recv_into(view[got:], len(view) - got, waitall)
                if not more:
                    return False
                got += more
            return True

        return read_socket

    stream = os.fdopen(fd, "rb", buffering=0)

    def read_stream(view):
        got = 0
        while got < len(view):
            more = stream.readinto(view[got:])
            if not more:
                return False
            got += more
        return True

    return read_stream


def widen_buffers(*fds):
    """Grows each socket's send buffer (or pipe) to the system's most, so a large tensor
    leaves in one write rather than a few hundred kB at a time, each a wake-up of the reader."""
    for fd in fds:
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISSOCK(mode):
                sock = socket.socket(fileno=fd)
                try:
                    with open("/proc/sys/net/core/wmem_max") as f:
                        size = min(int(f.read()), 16 << 20)
                    # The kernel doubles what it is asked for (bookkeeping): ask for half.
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size // 2)
                finally:
                    sock.detach()
            elif stat.S_ISFIFO(mode):
                import fcntl

                with open("/proc/sys/fs/pipe-max-size") as f:
                    size = min(int(f.read()), 16 << 20)
                fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
        except (OSError, ValueError, ImportError):
            pass  # Not Linux, or not allowed: the default size works, only slower.
