"""djl_python.pair_list (Kiln's own implementation)."""

from kiln_python.pair_list import PairList  # noqa: F401
