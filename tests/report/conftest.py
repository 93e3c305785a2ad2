"""Fixtures of the report's browser tests: Debian's chromium driven by playwright, real runs.

Playwright never downloads a browser here: it launches ``/usr/bin/chromium`` (``.ci/run``
installs it). When chromium or playwright is missing the tests are skipped with the reason,
except in CI (``CI=true``), where they fail: CI must not pass by silently skipping them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from tau2_retail.report.page import write_report
from tau2_retail.testing.unavailable import unavailable
from tests.report.runs import MIXED_PLAN, write_run

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 1000}

# task id -> the agent of each trial (see tests/report/runs.py); 2 and 19 have NL assertions
BROWSER_PLAN = {**MIXED_PLAN, "36": ["oracle", "oracle"], "64": ["noop", "oracle"]}
BASELINE_PLAN = {task: ["oracle", "noop"] for task in BROWSER_PLAN}


def _unavailable(reason: str) -> NoReturn:
    unavailable(
        reason, in_ci=".ci/run installs chromium, tox installs the 'browser' dependency group"
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless chromium for the tests of one module.

    Not longer: while playwright's sync API is active the thread has a running event loop,
    and the suite's other tests (``asyncio.run``, pytest-asyncio) cannot start theirs.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (the 'browser' dependency group)")
    if not CHROMIUM.is_file():
        _unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@dataclass
class Opened:
    """A page showing a report, and what it did: console messages, errors, requests."""

    page: Page
    url: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def foreign_requests(self) -> list[str]:
        """Requests for anything but the report file itself."""
        own = self.url.split("#", 1)[0]
        return [url for url in self.requests if url.split("#", 1)[0] != own]


@pytest.fixture
def open_report(browser: Browser) -> Iterator[Callable[..., Opened]]:
    """``open_report(path, fragment="")``: the report loaded and rendered in a fresh page.

    Every request but the report's own is recorded and aborted, so no test ever reaches the
    network even if the page tried to.
    """
    contexts = []

    def opener(path: Path, fragment: str = "") -> Opened:
        context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page=page, url=path.resolve().as_uri())

        def route(route: Any) -> None:
            if route.request.url.split("#", 1)[0] == opened.url:
                route.continue_()
            else:
                route.abort()

        context.route("**/*", route)
        page.on("request", lambda request: opened.requests.append(request.url))
        page.on(
            "console",
            lambda message: (
                opened.console_errors.append(message.text) if message.type == "error" else None
            ),
        )
        page.on("pageerror", lambda error: opened.page_errors.append(str(error)))
        page.goto(opened.url + fragment)
        page.wait_for_selector("body[data-ready='1']", state="attached")
        return opened

    yield opener
    for context in contexts:
        context.close()


@pytest.fixture(scope="session")
def mixed_run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-trial run with passes, failures, an infra error, a judge and a hostile agent."""
    run = tmp_path_factory.mktemp("report") / "mixed"
    write_run(run, data_dir, BROWSER_PLAN, agent_model="demo-agent")
    write_report(run)
    return run


@pytest.fixture(scope="session")
def baseline_run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tasks, another agent mix, no judge: what ``mixed_run`` is compared with."""
    run = tmp_path_factory.mktemp("report") / "baseline"
    write_run(run, data_dir, BASELINE_PLAN, judge=False, agent_model="baseline-agent")
    return run


PLUGIN_RUN_ARGS = (
    "--tau2-agent-model=builtin:noop",
    "--tau2-tasks=0,5,10,12,24",
    "--tau2-trials=2",
)


_BENCHMARK_OPTIONS = ("-p", "no:cacheprovider", "-q", "-n", "0", "-k", "tau2_retail")


def run_benchmark(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m pytest -k tau2_retail ARGS`` in the repository, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["TAU2_DATA_DIR"] = str(data_dir)
    command = [sys.executable, "-m", "pytest", *_BENCHMARK_OPTIONS, *args]
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="session")
def plugin_run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real benchmark run through pytest and the plugin (noop agent, 2 trials, 5 tasks).

    Its ``report.html`` is the one the plugin writes at the end of the session.
    """
    output = tmp_path_factory.mktemp("plugin-runs")
    completed = run_benchmark(
        data_dir, *PLUGIN_RUN_ARGS, f"--tau2-output-dir={output}", "--tau2-run-id=plugin"
    )
    run = output / "plugin"
    # noop fails most scenarios: exit 1 (tests failed) is the expected outcome
    assert completed.returncode == 1, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert (run / "summary.json").is_file(), completed.stdout[-3000:]
    return run
