"""djl_python.session_manager (Kiln's own implementation)."""

from kiln_python.session_manager import Session, SessionManager  # noqa: F401
