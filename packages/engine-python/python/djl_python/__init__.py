"""DJL Serving's module name for the same Input/Output API (Kiln's own implementation)."""

from kiln_python.inputs import Input, Output  # noqa: F401
