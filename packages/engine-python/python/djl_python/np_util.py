"""djl_python.np_util (Kiln's own implementation)."""

from kiln_python.np_util import from_nd_list, to_nd_list  # noqa: F401
