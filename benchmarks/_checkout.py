"""Imported first by the benchmark scripts that import ``tau2_retail``: makes sure a script
measures the code beside it, not another copy the interpreter has installed.

The package is built from mapped folders (``src/tau2_retail`` and the top-level ``tools/``,
``plugins/`` and ``fixtures/``), so only an editable install of this checkout imports this
code; a script run by an interpreter that has another copy stops at once and says how to install
this one.

A script run as ``python benchmarks/NAME.py`` has its own folder on ``sys.path`` already (that
is how it finds this module, ``_measure`` and ``_scripted_server``). Only the scripts import
this module: ``_measure`` does not, since it is also the pytest plugin of the measured runs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent


def _imported_from(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # its parent package is not installed
        return None
    return Path(spec.origin).resolve() if spec is not None and spec.origin else None


for _name, _file in (
    ("tau2_retail", CHECKOUT / "src" / "tau2_retail" / "__init__.py"),
    ("tau2_retail.tools", CHECKOUT / "tools" / "__init__.py"),
):
    if (_found := _imported_from(_name)) != _file:
        found = f"finds no {_name}" if _found is None else f"imports {_name} from {_found}"
        sys.exit(
            f"{Path(sys.argv[0]).name}: {sys.executable} {found}, not this checkout's "
            f"({CHECKOUT}); install it there: "
            f"pip install -e {CHECKOUT} --config-settings editable_mode=strict"
        )
