"""Upstream tau2-bench's model-visible text, derived from its pinned sources (parsed, never run)."""

from __future__ import annotations

from tau2_retail.data.upstream.source import SOURCES
from tau2_retail.data.upstream.texts import UpstreamTexts, load_upstream_texts

__all__ = ["SOURCES", "UpstreamTexts", "load_upstream_texts"]
