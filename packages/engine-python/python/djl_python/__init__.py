"""DJL Serving's module name for the same API (Kiln's own implementation)."""

from kiln_python.inputs import Input, Output  # noqa: F401
from kiln_python.pair_list import PairList  # noqa: F401
from kiln_python.session_manager import Session, SessionManager  # noqa: F401
