"""Upstream tau2-bench's model-visible text as sha256 digests (``tau2_profile_digests.json``).

The JSON holds only digests and request parameters (no upstream text): the tau2 profile's
derived prompts and schemas are pinned to it, which proves byte identity without copying them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["DIGESTS", "json_digest", "text_digest"]

DIGESTS: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parent / "tau2_profile_digests.json").read_text(encoding="utf-8")
)


def text_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def json_digest(value: Any) -> str:
    return text_digest(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
