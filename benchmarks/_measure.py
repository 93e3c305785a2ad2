"""Shared helpers of the benchmark scripts: run pytest as a subprocess and measure it.

It imports only the standard library and pytest, so that it is cheap as the pytest plugin it
contains:

- :func:`run_suite` runs one pytest command and returns its wall time (``perf_counter`` from
  just before the process starts to just after it exits), the CPU time and peak RSS of the
  whole process tree (``os.wait4``: the controller plus the xdist workers it reaped), its exit
  status, and what the probe wrote.
- The probe: given as ``-p _measure`` (with ``benchmarks/`` on ``PYTHONPATH``) and with
  ``TAU2_BENCH_PROBE_DIR`` set, every pytest process (controller and each xdist worker) writes
  ``<role>-<pid>.json`` at exit: its own ``getrusage(RUSAGE_SELF)`` (CPU, peak RSS), a
  timeline (``time.monotonic``, the same clock in every process on Linux) and, in the process
  that ran them, per test the phase durations pytest reports and the process CPU time spent
  between ``pytest_runtest_logstart`` and ``pytest_runtest_logfinish``.
- :func:`reference_ms` times a fixed Python workload: the host's speed at that moment (a
  virtual machine's moves from minute to minute).
- :func:`machine` describes the machine; :func:`table` prints rows; :func:`write_json` saves
  figures under ``benchmarks/results/`` (git-ignored).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "benchmarks"
RESULTS_DIR = BENCH_DIR / "results"
PROBE_ENV = "TAU2_BENCH_PROBE_DIR"
SCENARIO_TEST = "test_tau2_retail["

_IMPORTED_AT = time.monotonic()
_IMPORTED_CPU = time.process_time()
PREIMPORT_ENV = "TAU2_BENCH_PREIMPORT_OPENAI"


# -- the probe (a pytest plugin; active only when PROBE_ENV is set) ---------------------------


class _Probe:
    """Records one pytest process's timeline, rusage and per-test figures, writes them at exit."""

    def __init__(self, config: Any, folder: Path) -> None:
        workerinput = getattr(config, "workerinput", None)
        self.folder = folder
        self.config = config
        self.role = workerinput["workerid"] if workerinput is not None else "controller"
        self.is_worker = workerinput is not None
        self.marks: dict[str, float] = {"plugin_imported": _IMPORTED_AT}
        self.cpu_marks: dict[str, float] = {"plugin_imported": _IMPORTED_CPU}
        self.tests: dict[str, dict[str, Any]] = {}
        self._started: tuple[float, float] = (0.0, 0.0)
        # CPU time in the cyclic garbage collector, per generation (gen 2 walks every object).
        self.gc_seconds = [0.0, 0.0, 0.0]
        self.gc_runs = [0, 0, 0]
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.process_time()
        else:
            generation = info["generation"]
            self.gc_seconds[generation] += time.process_time() - self._gc_start
            self.gc_runs[generation] += 1

    def mark(self, name: str) -> None:
        if name not in self.marks:
            self.marks[name] = time.monotonic()
            self.cpu_marks[name] = time.process_time()

    @property
    def runs_tests(self) -> bool:
        # Under xdist the controller only relays the workers' test events: no per-test CPU there.
        return self.is_worker or not self.config.pluginmanager.has_plugin("dsession")

    def pytest_collection_finish(self, session: Any) -> None:
        self.mark("collected")

    @pytest.hookimpl(wrapper=True)
    def pytest_generate_tests(self, metafunc: Any) -> Any:
        # the tau2 plugin parametrizes here, loading and verifying the data (once per process)
        if "tau2_scenario" in metafunc.fixturenames:
            self.mark("data_start")
        result = yield
        if "tau2_scenario" in metafunc.fixturenames:
            self.mark("data_loaded")
        return result

    def preimport_openai(self) -> None:
        """Import ``openai`` now and mark it, so its one-time cost is seen apart from the tests."""
        self.mark("openai_start")
        import openai  # noqa: F401

        self.mark("openai_imported")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: Any) -> None:
        self.mark("sessionfinish")

    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.marks["last_worker_down"] = time.monotonic()

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.mark("terminal_summary")

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self.runs_tests:
            self.mark("first_test")
            self._started = (time.monotonic(), time.process_time())

    def pytest_runtest_logreport(self, report: Any) -> None:
        if self.runs_tests:
            record = self.tests.setdefault(report.nodeid, {})
            record[report.when] = report.duration

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        if self.runs_tests:
            wall0, cpu0 = self._started
            record = self.tests.setdefault(nodeid, {})
            record["wall"] = time.monotonic() - wall0
            record["cpu"] = time.process_time() - cpu0
            self.marks["last_test"] = time.monotonic()
            self.cpu_marks["last_test"] = time.process_time()

    def pytest_unconfigure(self, config: Any) -> None:
        self.mark("unconfigure")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        record = {
            "role": self.role,
            "pid": os.getpid(),
            "cpu_user_s": usage.ru_utime,
            "cpu_sys_s": usage.ru_stime,
            "maxrss_mb": usage.ru_maxrss / 1024,  # KB on Linux
            "gc_seconds": self.gc_seconds,
            "gc_runs": self.gc_runs,
            "marks": self.marks,
            "cpu_marks": self.cpu_marks,
            "tests": self.tests,
        }
        path = self.folder / f"{self.role}-{os.getpid()}.json"
        path.write_text(json.dumps(record), encoding="utf-8")
        atexit.register(_mark_exit, path.with_suffix(".exit"))


def _mark_exit(path: Path) -> None:
    path.write_text(str(time.monotonic()), encoding="utf-8")


def pytest_configure(config: Any) -> None:
    folder = os.environ.get(PROBE_ENV)
    if folder:
        probe = _Probe(config, Path(folder))
        probe.mark("configured")
        if os.environ.get(PREIMPORT_ENV):
            probe.preimport_openai()
        config.pluginmanager.register(probe, "tau2-bench-probe")


# -- running pytest ---------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class Run:
    """One pytest process tree, measured from outside (and from inside when probed)."""

    argv: list[str]
    wall_s: float
    cpu_s: float
    returncode: int
    started: float  # time.monotonic() just before the process started
    output: str
    processes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def workers(self) -> list[dict[str, Any]]:
        return [p for p in self.processes if p["role"] != "controller"]

    @property
    def controller(self) -> dict[str, Any] | None:
        return next((p for p in self.processes if p["role"] == "controller"), None)

    def scenario_tests(self) -> list[dict[str, Any]]:
        """Per scenario test (``test_tau2_retail[...]``): phase durations and CPU.

        Each record also has ``scenario_id`` (``tau2_retail__N[-trialK]``) and ``first``: True
        for the first scenario test of its process, which also pays the session's one-time
        set-up (e.g. importing ``openai`` and building the endpoint clients).
        """
        tests = []
        for process in self.processes:
            first = True
            for nodeid, test in process["tests"].items():  # in the order they ran
                if SCENARIO_TEST in nodeid:
                    scenario = nodeid.split(SCENARIO_TEST, 1)[1].rstrip("]")
                    tests.append({**test, "scenario_id": scenario, "first": first})
                    first = False
        return tests

    def last_line(self) -> str:
        lines = [line for line in self.output.splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def test_count(self) -> int:
        """The tests pytest's last line counts (run or collected)."""
        return sum(int(number) for number in _COUNTED.findall(self.last_line()))


_COUNTED = re.compile(r"(\d+) (?:passed|failed|skipped|errors?|xfailed|xpassed|tests? collected)")


def child_env(probe_dir: Path | None = None, *, preimport_openai: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(PREIMPORT_ENV, None)
    if preimport_openai:
        env[PREIMPORT_ENV] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(BENCH_DIR), env.get("PYTHONPATH", "")) if p)
    env.pop(PROBE_ENV, None)
    if probe_dir is not None:
        env[PROBE_ENV] = str(probe_dir)
    return env


def run_suite(
    args: Sequence[str],
    *,
    probe_dir: Path | None = None,
    python: str = sys.executable,
    cwd: Path = ROOT,
    preimport_openai: bool = False,
    prefix: Sequence[str] = (),
    write_bytecode: bool = False,
) -> Run:
    """Run ``python -m pytest ARGS`` from the repository root and measure it.

    With ``probe_dir`` the probe plugin is loaded (``-p _measure``) and each process's record
    is read back from that (empty) folder. ``prefix`` goes before the command (a profiler).
    ``write_bytecode`` lifts ``PYTHONDONTWRITEBYTECODE`` for this run: it writes the bytecode
    caches (pytest's rewritten modules too) that an ordinary environment has after one run.
    """
    argv = [python, "-m", "pytest", *args]
    if probe_dir is not None:
        probe_dir.mkdir(parents=True, exist_ok=True)
        for stale in [*probe_dir.glob("*.json"), *probe_dir.glob("*.exit")]:
            stale.unlink()
        argv[3:3] = ["-p", "_measure"]
    argv[:0] = prefix
    env = child_env(probe_dir, preimport_openai=preimport_openai)
    if write_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.monotonic()
    start = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert process.stdout is not None
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    process.stdout.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    run = Run(
        argv=argv,
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        returncode=process.returncode,
        started=started,
        output=output.decode("utf-8", "replace"),
    )
    if probe_dir is not None:
        for path in sorted(probe_dir.glob("*.json")):
            process = json.loads(path.read_text(encoding="utf-8"))
            exit_mark = path.with_suffix(".exit")
            if exit_mark.exists():
                process["marks"]["atexit"] = float(exit_mark.read_text(encoding="utf-8"))
            run.processes.append(process)
    return run


# -- reading artifacts ------------------------------------------------------------------------


def artifact_sizes(run_dir: Path) -> dict[str, Any]:
    """Bytes on disk per scenario folder (every file under it) and per file name, in KB."""
    per_scenario: list[int] = []
    per_file: dict[str, list[int]] = {}
    for metrics in run_dir.glob("**/metrics.json"):
        folder = metrics.parent
        total = 0
        for path in folder.rglob("*"):
            if path.is_file():
                size = path.stat().st_size
                total += size
                per_file.setdefault(path.relative_to(folder).as_posix(), []).append(size)
        per_scenario.append(total)
    return {
        "scenarios": len(per_scenario),
        "per_scenario_kb_median": statistics.median(per_scenario) / 1024 if per_scenario else 0,
        "per_scenario_kb_max": max(per_scenario, default=0) / 1024,
        "total_mb": sum(per_scenario) / 1024 / 1024,
        "per_file_kb_mean": {
            name: statistics.fmean(sizes) / 1024 for name, sizes in sorted(per_file.items())
        },
    }


def completions_from_metrics(run_dir: Path) -> dict[str, dict[str, int]]:
    """Per scenario id, the completions the suite recorded (``token_usage.<role>.n_calls``)."""
    completions: dict[str, dict[str, int]] = {}
    for path in run_dir.glob("**/metrics.json"):
        metrics = json.loads(path.read_text(encoding="utf-8"))
        completions[metrics["scenario_id"]] = {
            role: value["n_calls"] for role, value in metrics["token_usage"].items()
        }
    return completions


# -- the host's speed ---------------------------------------------------------------------------

# A fixed pure-Python workload (dicts, strings, JSON: the harness's kind of work) timed in CPU
# seconds, in a fresh process on the idle machine. A virtual machine's cores do not keep one
# speed: on this project's 2-core VM it took 13 ms in one minute and 29 ms some minutes later,
# and the same benchmark row's CPU per completion moved with it.
_REFERENCE_SCRIPT = """
import json, sys, time
def work():
    table = {}
    for i in range(60000):
        table[f"k{i % 997}"] = [i, str(i), {"a": i}]
    return len(json.loads(json.dumps(table)))
for _ in range(int(sys.argv[1])):
    started = time.process_time()
    work()
    print(round((time.process_time() - started) * 1000, 3), flush=True)
    time.sleep(0.05)
"""


def reference_ms(samples: int = 9) -> float:
    """The median CPU milliseconds of the reference workload now (about 0.5 s of the idle
    machine): how fast the host runs Python at this moment; read a row's CPU beside it."""
    output = subprocess.run(
        [sys.executable, "-c", _REFERENCE_SCRIPT, str(samples)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return median(float(line) for line in output.split())


_FILES_SCRIPT = """
import os, sys, tempfile, time, shutil
base = sys.argv[1]
for _ in range(int(sys.argv[2])):
    folder = tempfile.mkdtemp(prefix="tau2-files-probe-", dir=base)
    started = time.perf_counter()
    for i in range(20):
        scenario = os.path.join(folder, str(i))
        os.mkdir(scenario)
        for name in range(10):
            temp = os.path.join(scenario, f".tmp-{name}")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, b"x" * 4000)
            os.close(fd)
            os.replace(temp, os.path.join(scenario, f"{name}.json"))
    print(round((time.perf_counter() - started) / 200 * 1000, 4), flush=True)
    shutil.rmtree(folder)
"""


def file_ms(folder: Path, samples: int = 5) -> float:
    """The median milliseconds to create, write and rename one small file in a new folder
    under ``folder``, as a scenario writes its ten artifacts (200 files a sample). The file
    system's speed now: on this project's 2-core VM it moved from 0.02 to 1.2 ms a file within
    minutes, on the same disk, nearly all of it kernel CPU in the writing thread."""
    folder.mkdir(parents=True, exist_ok=True)
    output = subprocess.run(
        [sys.executable, "-c", _FILES_SCRIPT, str(folder), str(samples)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return median(float(line) for line in output.split())


# -- describing and reporting -----------------------------------------------------------------


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def machine() -> dict[str, Any]:
    """Cores, memory, Python and the load when the benchmark started."""
    mem_kb = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    except OSError:
        pass
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": load_average(),
        "pythondontwritebytecode": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
    }


def machine_line(figures: Mapping[str, Any]) -> str:
    """The report's first line: the machine and the load at the start and at the end."""
    m = figures["machine"]
    return (
        f"\nmachine: {m['cpus']} cores ({m['cpu_model']}), {m['memory_gb']} GB, Python "
        f"{m['python']}; load average {m['load_average_at_start'][0]:.2f} at start, "
        f"{figures['load_average_at_end'][0]:.2f} at end"
    )


def median(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.median(data) if data else float("nan")


def percentile(values: Iterable[float], fraction: float) -> float:
    data = sorted(values)
    if not data:
        return float("nan")
    return data[min(len(data) - 1, round(fraction * (len(data) - 1)))]


def write_json(name: str, figures: Mapping[str, Any]) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(figures, indent=1, default=str) + "\n", encoding="utf-8")
    return path
