"""A project that runs the benchmark module in pytest: what the plugin, reliability and
packaging tests and the benchmark scripts use to run scenarios as a user would.

``make_bench(folder, data_dir)`` writes ``test_scenarios.py`` (the shipped benchmark module),
a ``pytest.ini`` and optionally a ``conftest.py`` into ``folder``. Its ``run`` is a real
``python -m pytest`` subprocess with a hermetic environment (no ``TAU2_*``, ``OPENAI_*``,
``PYTEST_*``, proxy or CI variable of the caller, except the data folder) and a time limit
scaled by ``TAU2_TEST_TIMEOUT_SCALE``; ``start`` leaves it running (for signals). With a
``pytest.Pytester`` attached, ``run_inprocess`` runs in the test's process, which is much
faster for runs that stop at start-up or after collection.

The inner project loads every plugin a user has installed (syrupy, hypothesis, anyio, the
cache provider): a run must behave with them, so none is switched off here.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import pytest

from tau2_retail.testing.run_files import RunFiles
from tau2_retail.testing.timeouts import scaled_timeout

__all__ = [
    "BENCHMARK_MODULE",
    "RUN_TIMEOUT_SECONDS",
    "USER_INI",
    "Bench",
    "Output",
    "Run",
    "Started",
    "benchmark_module",
    "error_lines",
    "hermetic_environ",
    "make_bench",
    "read_only",
]

RUN_TIMEOUT_SECONDS: Final = 240.0
"""The unscaled limit of one benchmark run in a subprocess (see ``scaled_timeout``)."""

USER_INI: Final = """\
[pytest]
testpaths = test_scenarios.py
asyncio_mode = strict
asyncio_default_fixture_loop_scope = function
strict = true
filterwarnings =
    error
"""
"""The ``pytest.ini`` of a user's project that holds the benchmark module."""

INI: Final = (
    USER_INI
    + """\
    # in-process runs: this process imported the installed plugin before the inner pytest
    ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning
# an endpoint agent with the scripted customer must be asked for explicitly
tau2_user_model = builtin:customer
"""
)
"""The bench's ``pytest.ini``: a user's, plus what in-process runs and endpoint tests need."""

_HERMETIC_PREFIXES: Final = (
    "TAU2_",
    "OPENAI_",
    "PYTEST_",
    # pytest keeps its cache in $TOX_ENV_DIR when set: an inner run under tox would write
    # into (and name) the outer tox environment instead of its own project
    "TOX_",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
)
_SHORT_SUMMARY: Final = re.compile(
    r"^(PASSED|FAILED|ERROR) test_scenarios\.py::test_tau2_retail\[(.+?)\]"
)


def benchmark_module() -> Path:
    """``tests_tau2_retail/test_scenarios.py`` of the installed (or editable) distribution."""
    spec = importlib.util.find_spec("tests_tau2_retail")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("tests_tau2_retail is not installed: pip install the project first")
    return Path(next(iter(spec.submodule_search_locations))) / "test_scenarios.py"


BENCHMARK_MODULE: Final = benchmark_module()


def hermetic_environ(data_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without the caller's tau2, OpenAI,
    pytest, tox, proxy and CI variables, with the data folder and a fixed terminal width."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if not k.upper().startswith(_HERMETIC_PREFIXES)}
    # pytest shows whole messages in the short summary when it sees a CI variable
    env.pop("CI", None)
    env.pop("BUILD_NUMBER", None)
    env.update(
        TAU2_DATA_DIR=str(data_dir),
        NO_PROXY="127.0.0.1,localhost",
        PYTHONDONTWRITEBYTECODE="1",
        # output must not depend on the caller's terminal (tox sets COLUMNS)
        COLUMNS="80",
    )
    return env


class Output(str):
    """Captured text that also offers ``pytest.LineMatcher``'s methods (``lines``,
    ``fnmatch_lines``, ``no_fnmatch_line``, ``str()``), so either style of assertion works."""

    __slots__ = ()

    @property
    def lines(self) -> list[builtins.str]:
        return self.splitlines()

    def str(self) -> builtins.str:
        return builtins.str.__str__(self)

    def matcher(self) -> pytest.LineMatcher:
        return pytest.LineMatcher(self.lines)

    def fnmatch_lines(self, lines: list[builtins.str], *, consecutive: bool = False) -> None:
        self.matcher().fnmatch_lines(lines, consecutive=consecutive)

    def re_match_lines(self, lines: list[builtins.str], *, consecutive: bool = False) -> None:
        self.matcher().re_match_lines(lines, consecutive=consecutive)

    def no_fnmatch_line(self, pattern: builtins.str) -> None:
        self.matcher().no_fnmatch_line(pattern)


def error_lines(output: builtins.str | pytest.LineMatcher) -> list[builtins.str]:
    """The ``ERROR:`` lines of a pytest run's stderr (captured text, or pytester's
    ``result.stderr``): how pytest prints a usage error (exit 4)."""
    lines = output.splitlines() if isinstance(output, builtins.str) else output.lines
    return [line for line in lines if line.startswith("ERROR:")]


@dataclass(frozen=True, slots=True)
class Run:
    """A finished pytest run: exit code, output, and where its junit XML is (if asked for).

    ``ret``/``assert_outcomes``/``parseoutcomes`` read as ``pytest.RunResult``'s do.
    """

    returncode: int
    stdout: Output
    stderr: Output
    junit: Path | None
    duration: float

    @property
    def ret(self) -> int:
        return self.returncode

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def _result(self) -> pytest.RunResult:
        return pytest.RunResult(self.returncode, self.stdout.lines, self.stderr.lines, 0.0)

    def parseoutcomes(self) -> dict[str, int]:
        return self._result().parseoutcomes()

    def assert_outcomes(self, **expected: int) -> None:
        self._result().assert_outcomes(**expected)

    def outcomes(self) -> dict[str, str]:
        """``passed``, ``failed`` or ``error`` per scenario id, from the ``-rA`` short summary.

        Not from the junit XML: there a passing scenario whose NL subtests were skipped (no
        judge) reads as skipped.
        """
        found: dict[str, str] = {}
        for line in self.stdout.lines:
            match = _SHORT_SUMMARY.match(line)
            if match:
                outcome = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error"}[match[1]]
                if found.get(match[2]) != "error":  # an error at teardown follows a pass
                    found[match[2]] = outcome
        return found


@dataclass(slots=True)
class Started:
    """A pytest process still running; ``wait`` collects it like ``Bench.run`` does."""

    process: subprocess.Popen[bytes]
    junit: Path | None
    out: IO[str]
    err: IO[str]
    started: float

    def wait(self, timeout: float = RUN_TIMEOUT_SECONDS) -> Run:
        try:
            self.process.wait(timeout=scaled_timeout(timeout))
        finally:
            self._stop()
        self.out.seek(0)
        self.err.seek(0)
        run = Run(
            self.process.returncode,
            Output(self.out.read()),
            Output(self.err.read()),
            self.junit,
            time.monotonic() - self.started,
        )
        self.close()
        return run

    def close(self) -> None:
        self.out.close()
        self.err.close()

    def kill(self) -> None:
        """Kill what is left of the process group this run started (its xdist workers too)."""
        self._stop()
        self.close()

    def _stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@dataclass(slots=True)
class Bench(RunFiles):
    """A project holding the benchmark module; see the module docstring.

    ``env`` is the subprocesses' environment; None means this process's at run time (a
    pytester fixture made it hermetic with monkeypatch, and tests may change it further).
    ``options`` go before every run's own arguments (e.g. ``-rA``); ``junit`` adds a
    ``--junitxml`` per run; ``prefix`` wraps the command (e.g. a tool that drops privileges).
    """

    path: Path
    output_dir: Path
    env: dict[str, str] | None
    options: list[str] = field(default_factory=list)
    junit: bool = False
    prefix: list[str] = field(default_factory=list)
    pytester: pytest.Pytester | None = None
    _runs: int = 0

    def add_ini(self, **values: str) -> None:
        """Append ``key = value`` lines to the project's ``[pytest]`` section."""
        ini = self.path / "pytest.ini"
        lines = "".join(f"{key} = {value}\n" for key, value in values.items())
        ini.write_text(ini.read_text(encoding="utf-8") + lines, encoding="utf-8")

    def command(self, *args: str, output_dir: bool = True) -> tuple[list[str], Path | None]:
        self._runs += 1
        junit = self.path / f"junit-{self._runs}.xml" if self.junit else None
        command = [*self.prefix, sys.executable, "-m", "pytest"]
        if output_dir:
            command.append(f"--tau2-output-dir={self.output_dir}")
        if junit is not None:
            command.append(f"--junitxml={junit}")
        return [*command, *self.options, *args], junit

    def run(self, *args: str, output_dir: bool = True, timeout: float = RUN_TIMEOUT_SECONDS) -> Run:
        """Run pytest to the end in a subprocess (killed, and the test failed, after the
        scaled ``timeout``); ``--tau2-output-dir`` is the project's unless told otherwise."""
        command, junit = self.command(*args, output_dir=output_dir)
        started = time.monotonic()
        process = self._complete(command, timeout=timeout)
        return Run(
            process.returncode,
            Output(process.stdout),
            Output(process.stderr),
            junit,
            time.monotonic() - started,
        )

    def python(
        self, *args: str, input: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` (e.g. ``-m tau2_retail summarize DIR``) in the project, with the
        runs' environment, to the end (killed, and the test failed, after the scaled
        ``timeout``); output captured as text."""
        return self._complete([sys.executable, *args], input=input, timeout=timeout)

    def _complete(
        self, command: list[str], *, input: str | None = None, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command,
            cwd=self.path,
            env=self.env,
            input=input,
            capture_output=True,
            text=True,
            timeout=scaled_timeout(timeout),
            check=False,
        )

    def start(self, *args: str) -> Started:
        """Start pytest in a session of its own (signals can go to the group); see ``Started``."""
        command, junit = self.command(*args)
        out = (self.path / f"stdout-{self._runs}.txt").open("w+")
        err = (self.path / f"stderr-{self._runs}.txt").open("w+")
        process = subprocess.Popen(
            command, cwd=self.path, env=self.env, stdout=out, stderr=err, start_new_session=True
        )
        return Started(process=process, junit=junit, out=out, err=err, started=time.monotonic())

    def run_inprocess(self, *args: str, output_dir: bool = True) -> pytest.RunResult:
        """Run pytest in this process (needs ``pytester``, whose environment the caller made
        hermetic): only for runs that stop at start-up or after collection."""
        if self.pytester is None:
            raise RuntimeError("run_inprocess needs a Bench made with a pytester")
        shown = (f"--tau2-output-dir={self.output_dir}",) if output_dir else ()
        return self.pytester.runpytest_inprocess(*shown, *self.options, *args)


def make_bench(
    folder: Path,
    data_dir: Path,
    *,
    conftest: str | None = None,
    pytester: pytest.Pytester | None = None,
    options: list[str] | None = None,
    junit: bool = False,
) -> Bench:
    """Write the benchmark project into ``folder`` (created if needed); runs write to
    ``folder/runs``. With ``pytester``, runs use this process's environment (see ``Bench``),
    else a hermetic copy of it with ``data_dir``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "test_scenarios.py").write_bytes(BENCHMARK_MODULE.read_bytes())
    (folder / "pytest.ini").write_text(INI, encoding="utf-8")
    if conftest is not None:
        (folder / "conftest.py").write_text(conftest, encoding="utf-8")
    return Bench(
        path=folder,
        output_dir=folder / "runs",
        env=None if pytester is not None else hermetic_environ(data_dir),
        options=list(options or ()),
        junit=junit,
        pytester=pytester,
    )


@contextlib.contextmanager
def read_only(folder: Path, bench: Bench) -> Iterator[None]:
    """``folder`` (and the files in it) not writable for the runs of ``bench``: modes 0555 and
    0444, and for root (which ignores modes) the runs' capabilities to override them dropped,
    as on a read-only mount. Skips the test where neither can be done. Modes are restored."""
    files = [path for path in folder.iterdir() if path.is_file()]
    for path in files:
        path.chmod(0o444)
    folder.chmod(0o555)
    prefix = bench.prefix
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: a read-only folder cannot be made")
        bench.prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
    try:
        yield
    finally:
        bench.prefix = prefix
        folder.chmod(0o755)
        for path in files:
            path.chmod(0o644)
