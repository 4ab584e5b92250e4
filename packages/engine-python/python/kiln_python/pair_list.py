"""DJL's PairList: named values in order, names free to repeat (an Input's or Output's contents).

Iterating gives (key, value) pairs, which is how the worker frames them."""


class PairList:
    def __init__(self, keys=None, values=None, pair_list=None, pair_map=None):
        self.keys = []
        self.values = []
        if keys is not None or values is not None:
            keys, values = list(keys or []), list(values or [])
            if len(keys) != len(values):
                raise ValueError("key value size mismatch.")
            self.keys, self.values = keys, values
        for key, value in pair_list or ():
            self.add(key, value)
        for key, value in (pair_map or {}).items():
            self.add(key, value)

    def __iter__(self):
        return zip(self.keys, self.values)

    def __len__(self):
        return len(self.keys)

    def __repr__(self):
        return "PairList(%r)" % self.keys

    def add(self, key=None, value=None, index=None, pair=None):
        if pair is not None:
            key, value = pair
        if value is None:
            return
        if index is None:
            self.keys.append(key)
            self.values.append(value)
        else:
            self.keys.insert(index, key)
            self.values.insert(index, value)

    def add_all(self, other):
        if other:
            self.keys.extend(other.get_keys())
            self.values.extend(other.get_values())

    def size(self):
        return len(self.keys)

    def is_empty(self):
        return not self.keys

    def get(self, key):
        """The first value under key, or None."""
        for name, value in self:
            if name == key:
                return value
        return None

    def key_at(self, index):
        return self.keys[index]

    def value_at(self, index):
        return self.values[index]

    def get_keys(self):
        return self.keys

    def get_values(self):
        return self.values
