"""Shared fixtures of the suite's own tests."""

from __future__ import annotations
