"""``ready_child``: yields a child that said it is ready, and refuses one that did not, under
``python -O`` too."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tau2_retail.testing.child import READY, ready_child
from tau2_retail.testing.timeouts import scaled_timeout


def test_a_child_that_said_ready_is_yielded_and_killed_at_the_end():
    with ready_child(f"import sys; print({READY!r}, flush=True); sys.stdin.read()") as child:
        assert child.poll() is None
    assert child.returncode is not None


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("print('starting', flush=True)", "its first line was 'starting\\n'; script: "),
        ("raise SystemExit(3)", "its first line was '' (its output ended: it exited or closed"),
    ],
    ids=["other-line", "exited"],
)
def test_a_child_that_did_not_say_ready_is_an_error(script, said):
    with (
        pytest.raises(RuntimeError, match="the child never said 'ready'") as error,
        ready_child(script),
    ):
        pytest.fail("entered with a child that is not ready")
    assert said in str(error.value)


def test_the_check_holds_under_python_optimize():
    # asserts are stripped under -O: the check must not be one
    script = (
        "from tau2_retail.testing.child import ready_child\n"
        "try:\n"
        "    with ready_child(\"print('starting', flush=True)\"):\n"
        "        print('entered')\n"
        "except RuntimeError as error:\n"
        "    print('refused:', error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-O", "-c", script],
        capture_output=True,
        text=True,
        timeout=scaled_timeout(60),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: the child never said 'ready'"), done.stdout
