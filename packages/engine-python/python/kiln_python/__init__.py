"""Kiln's Python mode: DJL Serving's Input/Output API, so a DJL model.py runs unchanged."""

from .inputs import Input, Output  # noqa: F401
