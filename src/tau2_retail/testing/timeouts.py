"""Time limits of the tests' subprocesses, scaled for slow or busy machines.

A limit only stops a hung run (the test then fails instead of stalling CI); nothing asserts how
long a run took. ``TAU2_TEST_TIMEOUT_SCALE`` (default 1) multiplies every limit: set it to 3 on
a loaded 2-core machine rather than editing numbers in tests.
"""

from __future__ import annotations

import math
import os
from typing import Final

__all__ = ["TIMEOUT_SCALE_ENV", "scaled_timeout"]

TIMEOUT_SCALE_ENV: Final = "TAU2_TEST_TIMEOUT_SCALE"


def scaled_timeout(seconds: float) -> float:
    """``seconds`` times ``$TAU2_TEST_TIMEOUT_SCALE``; a bad value raises naming the variable."""
    raw = os.environ.get(TIMEOUT_SCALE_ENV, "").strip() or "1"
    try:
        scale = float(raw)
    except ValueError:
        scale = math.nan
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"{TIMEOUT_SCALE_ENV}={raw!r}: expected a number > 0, e.g. 2")
    return seconds * scale
