"""DJL's SessionManager: state a stateful handler keeps between requests, one folder per session
(pickled values and numpy memmaps) under sessions_path, dropped sessions_expiration seconds after
it was made. Kiln keeps sessions on local disk only: sessions_s3url is not supported."""

import logging
import os
import pickle
import re
import shutil
import tempfile
import time
import uuid

UUID_PATTERN = re.compile("[0-9a-f-]{36}")
_CREATION_TIME = ".creation_time"


class Session:
    def __init__(self, session_id, session_root):
        self.session_id = session_id
        self.files_path = os.path.join(session_root, session_id)

    def put(self, key, value):
        with open(self._path(key), "wb") as f:
            pickle.dump(value, f)

    def get(self, key, d=None):
        path = self._path(key)
        if not os.path.isfile(path):
            return d
        with open(path, "rb") as f:
            return pickle.load(f)

    def get_as_numpy(self, key, shape, dtype="float32", create=False):
        """A writable array kept in the session's file `key` (made, zero-filled, with create)."""
        import numpy as np

        if create:
            open(self._path(key), "wb").close()
        return np.memmap(self._path(key), dtype=dtype, mode="r+", shape=shape)

    def remove(self):
        if not os.path.exists(self.files_path):
            logging.warning("session not found: %s", self.session_id)
            return False
        shutil.rmtree(self.files_path)
        return True

    def _path(self, key):
        return os.path.join(self.files_path, key.replace("/", "-"))


class SessionManager:
    def __init__(self, properties):
        self.expiration = int(properties.get("sessions_expiration", str(20 * 60)))
        default_root = "/dev/shm" if os.path.exists("/dev/shm") else tempfile.gettempdir()
        self.sessions_path = properties.get(
            "sessions_path", os.path.join(default_root, "djl_sessions")
        )
        if properties.get("sessions_s3url"):
            logging.warning("sessions_s3url is not supported by Kiln: sessions stay local")
        os.makedirs(self.sessions_path, exist_ok=True)

    def create_session(self):
        self._clean_expired_sessions()
        session = Session(str(uuid.uuid4()), self.sessions_path)
        os.makedirs(session.files_path)
        session.put(_CREATION_TIME, time.time())
        return session

    def get_session(self, session_id):
        """The session, or None when there is none of that id (closed, or expired)."""
        _check_id(session_id)
        session = Session(session_id, self.sessions_path)
        return session if os.path.exists(session.files_path) else None

    def close_session(self, session_id):
        _check_id(session_id)
        Session(session_id, self.sessions_path).remove()

    def _clean_expired_sessions(self):
        now = time.time()
        for session_id in os.listdir(self.sessions_path):
            created = Session(session_id, self.sessions_path).get(_CREATION_TIME)
            if created is not None and now - created > self.expiration:
                self.close_session(session_id)


def _check_id(session_id):
    if not session_id or not UUID_PATTERN.match(session_id):
        raise ValueError(f"invalid session_id: {session_id}")
