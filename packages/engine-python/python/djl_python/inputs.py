"""djl_python.inputs (Kiln's own implementation)."""

from kiln_python.inputs import Input  # noqa: F401
