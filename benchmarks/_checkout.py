"""Imported first by the benchmark scripts that import ``tau2_retail``: puts this checkout
first on ``sys.path``, so a script measures the code beside it, whatever copy the interpreter
has installed.

A script run as ``python benchmarks/NAME.py`` has its own folder on ``sys.path`` already (that
is how it finds this module, ``_measure`` and ``_scripted_server``). Only the scripts import
this module: ``_measure`` does not, since it is also the pytest plugin of the measured runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
