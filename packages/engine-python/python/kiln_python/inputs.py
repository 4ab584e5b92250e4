"""Input and Output as DJL Serving's Python mode has them; contents are named byte strings
or raw tensors (numpy arrays) carried over Kiln's frame protocol."""

import io
import json


class Input:
    def __init__(self, properties=None, contents=None):
        self.properties = dict(properties or {})
        # A list of (name, value) where value is bytes or a numpy array.
        self.content = list(contents or [])

    def is_empty(self):
        return not self.content

    def get_properties(self):
        return self.properties

    def get_property(self, key):
        return self.properties.get(key)

    def is_batch(self):
        return "batch_size" in self.properties

    def get_batches(self):
        return [self] if not self.is_batch() else self._batches

    def _value(self, key=None):
        if not self.content:
            raise ValueError("the input is empty")
        if key is None:
            return self.content[0][1]
        for name, value in self.content:
            if name == key:
                return value
        raise KeyError(key)

    def get_as_bytes(self, key=None):
        value = self._value(key)
        return value.tobytes() if hasattr(value, "tobytes") else value

    def get_as_string(self, key=None):
        return self.get_as_bytes(key).decode("utf-8")

    def get_as_json(self, key=None):
        return json.loads(self.get_as_string(key))

    def get_as_numpy(self, key=None):
        """Every tensor of the input, in order (a single named content when key is given)."""
        import numpy as np

        if key is not None:
            return [self._as_array(self._value(key))]
        arrays = [v for _, v in self.content if isinstance(v, np.ndarray)]
        if arrays:
            return arrays
        return self.get_as_npz()

    def get_as_npz(self, key=None):
        import numpy as np

        data = np.load(io.BytesIO(self.get_as_bytes(key)), allow_pickle=False)
        if isinstance(data, np.ndarray):
            return [data]
        return [data[name] for name in data.files]

    def get_as_image(self, key=None):
        from PIL import Image

        return Image.open(io.BytesIO(self.get_as_bytes(key)))

    @staticmethod
    def _as_array(value):
        import numpy as np

        if isinstance(value, np.ndarray):
            return value
        return np.load(io.BytesIO(value), allow_pickle=False)


class Output:
    def __init__(self, code=200, message="OK"):
        self.code = code
        self.message = message
        self.properties = {}
        self.content = []

    def set_code(self, code):
        self.code = code
        return self

    def set_message(self, message):
        self.message = message
        return self

    def add_property(self, key, value):
        self.properties[key] = str(value)
        return self

    def add(self, value, key=None):
        if isinstance(value, str):
            value = value.encode("utf-8")
        elif not isinstance(value, (bytes, bytearray)) and not hasattr(value, "dtype"):
            value = bytes(value)
        self.content.append((key or "data", value))
        return self

    def add_as_json(self, value, key=None):
        self.add_property("content-type", "application/json")
        return self.add(json.dumps(value), key)

    def add_as_numpy(self, arrays, key=None):
        """Adds each array as a raw tensor (dtype, shape, bytes)."""
        import numpy as np

        for i, array in enumerate(arrays):
            name = key if key is not None and len(arrays) == 1 else (key or "data") + (str(i) if len(arrays) > 1 else "")
            self.content.append((name, np.ascontiguousarray(array)))
        return self

    def add_as_npz(self, arrays, key=None):
        import numpy as np

        buffer = io.BytesIO()
        np.savez(buffer, *arrays)
        self.add_property("content-type", "tensor/npz")
        return self.add(buffer.getvalue(), key)
