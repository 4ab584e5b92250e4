"""djl_python.outputs (Kiln's own implementation)."""

from kiln_python.inputs import Output  # noqa: F401
