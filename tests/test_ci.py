"""``.ci/run`` runs the README's two commands, as written and in their order (issue 31): a
change to the README's commands is what CI runs, and CI cannot pass with commands a new user
would not type."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.test_docs import CHECKOUT, blocks

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readmes_two_commands_in_their_order() -> None:
    printed = subprocess.run(
        [str(ROOT / ".ci" / "run"), "--commands"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    (readme,) = [block for block in blocks(ROOT / "README.md") if block.marker == CHECKOUT]

    assert printed == readme.text + "\n"
    commands = [line for line in readme.text.splitlines() if line and not line.startswith("#")]
    assert commands == [
        "python -m pip install . && python -m tau2_retail data fetch && "
        "python -m pytest -k tau2_retail -n 2",
        "python -m pip install tox && tox",
    ]
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert 'bash -euo pipefail -c "$commands"' in script
