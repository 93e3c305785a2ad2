"""Tool-level failures: a ``ToolError`` becomes ``Error: <message>`` for the model."""

from __future__ import annotations

__all__ = ["ToolError"]


class ToolError(Exception):
    """A tool refused the call; ``str(error)`` is the exact text after ``Error: ``."""
