"""Your agent as Python code, the pytest way: where it comes from and one fresh agent per scenario.

Two sources, checked at start-up (``ConfigError``, a ``pytest.UsageError`` there: exit 4, one line):

- ``--tau2-agent=package.module:factory`` (ini ``tau2_agent``, env ``TAU2_AGENT``): the factory
  is called once per scenario and trial, also for scenarios started ahead of their tests
  (``--tau2-concurrency``).
- a ``tau2_agent`` fixture in the user's ``conftest.py``. pytest sets a function-scoped fixture
  up only when it reaches the test, so a scenario started ahead cannot have it yet: the fixture
  decides how scenarios overlap (see :class:`AgentSupply`).

:class:`AgentSupply` is the per-process object (under ``AGENTS_KEY``) that the scheduler asks for
each scenario's agent; it learns the fixture's scope from the public ``pytest_fixture_setup``
hook (``request.scope``), never from pytest's internals.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Generator
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Literal

import pytest

from tau2_retail.errors import ConfigError
from tau2_retail.models.agent import (
    FIXTURE_SOURCE,
    AgentFactory,
    AgentIdentity,
    AgentLedger,
    AgentRunner,
    agent_style,
)
from tau2_retail.models.agent_import import load_agent_factory
from tau2_retail.models.agent_thread import BLOCKING_STEP_SECONDS
from tau2_retail.plugins.installed import BENCHMARK_PACKAGE
from tau2_retail.settings import AgentSource, Tau2Settings

__all__ = [
    "AGENTS_KEY",
    "FIXTURE_NAME",
    "AgentSource",
    "AgentSupply",
    "fixture_sources",
    "import_agent_source",
    "load_agent_source",
    "unreachable_fixture_problem",
]

FIXTURE_NAME: Final = "tau2_agent"
#: the module of the plugin's own ``tau2_agent`` fixture (None: the configured agent)
_DEFAULT_FIXTURE_MODULE: Final = "tau2_retail.plugins.scenario_fixtures"
Mode = Literal["configured", "shared", "per_item"]


def fixture_sources(config: pytest.Config) -> tuple[list[str], list[tuple[str, str]]]:
    """The ``tau2_agent`` fixtures of the user's modules loaded at start-up, as
    ``path::tau2_agent``: those that reach the scenarios, in pytest's order of precedence (the
    last one is the one pytest gives them: a conftest's over a plugin module's, then the one
    registered last), and those that do not, each with why and the fix.

    pytest gives a conftest's fixtures only to the tests below the conftest's folder (a
    folder outside the rootdir counts as the rootdir), and a plugin module's to every test,
    unless a plugin registered after it has the fixture too: the plugin's own
    ``tau2_agent`` is registered with this plugin (an entry point), so a module given with
    ``-p`` or by another entry point loaded first is overridden by it; a conftest's
    ``pytest_plugins`` and ``PYTEST_PLUGINS`` come later. The scenarios are collected at the
    rootdir, as the package ``tests_tau2_retail``: a conftest in another folder (``tests/``,
    the folder pytest was run from when the configuration file is higher up) does not reach
    them. A conftest below the rootdir that pytest loads only while collecting is not seen
    here; :meth:`AgentSupply.accept` checks the fixture pytest really gave each scenario.
    """
    modules: list[str] = []
    conftests: list[str] = []
    not_reaching: list[tuple[str, str]] = []
    default_registered = False
    for _, plugin in config.pluginmanager.list_name_plugin():
        if not isinstance(plugin, ModuleType):
            continue
        if plugin.__name__ == _DEFAULT_FIXTURE_MODULE:
            default_registered = True
            continue
        file = getattr(plugin, "__file__", None)
        if not file or FIXTURE_NAME not in vars(plugin):
            continue
        path = Path(file)
        shown = f"{_shown(path, config.rootpath)}::{FIXTURE_NAME}"
        if path.name != "conftest.py" and not default_registered:
            not_reaching.append((shown, _overridden(plugin.__name__, config.rootpath)))
        elif path.name == "conftest.py" and not _reaches_scenarios(path, config.rootpath):
            not_reaching.append((shown, _below_a_folder(config.rootpath)))
        else:
            (conftests if path.name == "conftest.py" else modules).append(shown)
    # pytest puts a conftest's fixture after every plugin module's, whatever the order they
    # were registered in (a conftest's pytest_plugins modules come after it): it wins
    return modules + conftests, not_reaching


def _below_a_folder(rootpath: Path) -> str:
    return (
        "pytest gives a conftest's fixtures only to the tests below its folder, and the "
        f"scenarios are collected at the rootdir; define the fixture in {rootpath / 'conftest.py'}"
        " (the rootdir's: its fixtures reach every test) or in a plugin module, or name the "
        "agent with --tau2-agent"
    )


def _overridden(module: str, rootpath: Path) -> str:
    return (
        f"the plugin module {module} was loaded before tau2_retail (with -p, or by an entry "
        f"point), and pytest gives the scenarios the {FIXTURE_NAME} fixture of the plugin "
        f"loaded last, tau2_retail's own; load it from {rootpath / 'conftest.py'} instead "
        f'(pytest_plugins = ["{module}"], without -p), or define the fixture there, or name '
        "the agent with --tau2-agent"
    )


def unreachable_fixture_problem(config: pytest.Config, settings: Tau2Settings) -> str | None:
    """Why the run would not play the agent the user put in a ``tau2_agent`` fixture: it is
    defined only where the scenarios do not reach it, and no other agent is named (the
    scenarios would get the built-in oracle while the user expects theirs); else None."""
    reaching, not_reaching = fixture_sources(config)
    if reaching or not not_reaching or settings.agent_source is not None:
        return None
    if settings.sources.get("agent_model", "default") != "default":
        return None  # an agent model named on purpose: a conftest's fixture is another matter
    fixture, why = not_reaching[-1]
    return f"{fixture} does not reach the scenarios: {why}"


def _reaches_scenarios(path: Path, rootpath: Path) -> bool:
    """Whether a conftest's fixtures reach the scenarios collected at the rootdir."""
    try:
        folder = path.parent.resolve().relative_to(rootpath.resolve()).as_posix()
    except ValueError:
        return True  # outside the rootdir: pytest gives it the rootdir's reach
    return folder in (".", BENCHMARK_PACKAGE)


def _shown(path: Path, rootpath: Path) -> str:
    try:
        return path.resolve().relative_to(rootpath.resolve()).as_posix()
    except ValueError:
        return os.fspath(path)


def _fixture_file(function: object) -> Path | None:
    """The file defining a fixture's function, resolved (None when it has none)."""
    try:
        file = inspect.getsourcefile(function)  # type: ignore[arg-type]
    except TypeError:
        return None
    return Path(file).resolve() if file else None


def load_agent_source(
    config: pytest.Config, *, spec: str, spec_source: str, defer: bool = False
) -> AgentSource | None:
    """The agent's source at start-up: the ``--tau2-agent`` factory or a conftest's
    ``tau2_agent`` fixture; ``ConfigError`` for a bad or conflicting one (the settings check
    that an agent model is not given too). With ``defer``, an import string is not imported
    yet: its source is ``pending`` (:func:`import_agent_source` imports it)."""
    reaching, _ = fixture_sources(config)
    fixture = reaching[-1] if reaching else None
    if fixture and spec:
        raise ConfigError(
            f"{spec_source}: --tau2-agent {spec!r} and the fixture {fixture} both name the "
            "agent; drop one of them"
        )
    if fixture:
        return AgentSource(identity=AgentIdentity(source=fixture, fixture=True))
    if not spec:
        return None
    pending = AgentSource(identity=AgentIdentity(source=spec), pending=True)
    return pending if defer else import_agent_source(pending, spec_source)


def import_agent_source(source: AgentSource, spec_source: str) -> AgentSource:
    """``source`` with its import string imported (its factory checked: a function factory is
    called twice); the same ``source`` when it is not pending. ``ConfigError`` names
    ``spec_source`` (``--tau2-agent``, ``ini tau2_agent``, ``TAU2_AGENT``)."""
    if not source.pending:
        return source
    try:
        factory, identity = load_agent_factory(source.identity.source)
    except ConfigError as error:
        raise ConfigError(f"{spec_source}: {error}") from None
    return AgentSource(identity=identity, factory=factory)


class AgentSupply:
    """Gives the scheduler each scenario's agent (None: the agent model of the options).

    What a ``tau2_agent`` fixture returns decides how scenarios overlap:

    - None (the plugin's own fixture): the ``--tau2-agent`` factory, or the agent model;
      scenarios start ahead of their tests (``--tau2-concurrency``).
    - a factory (a class, or a function returning a fresh agent) from a fixture of a broader
      scope than function (e.g. ``scope="session"``): called once per scenario and trial,
      scenarios start ahead as above.
    - an agent object, or a factory, from a function-scoped fixture: that test's own agent.
      Its scenario can start only when pytest sets the fixture up, at its test: scenarios then
      run one at a time in this process (use ``-n`` for processes, or a session-scoped factory
      to keep ``--tau2-concurrency``).
    """

    def __init__(self, source: AgentSource | None, rootpath: Path) -> None:
        self.source = source
        self.rootpath = rootpath
        self.mode: Mode | None = None
        self.fixture_scope: str | None = None
        #: ``path::tau2_agent`` of the fixture pytest set up for a scenario (None: the plugin's)
        self.fixture_given: str | None = None
        self._per_item: dict[str, AgentRunner] = {}
        self._shared: AgentFactory | None = None
        self.identity: AgentIdentity | None = source.identity if source else None
        #: the agents handed out in this process: one handed out twice is refused
        self.ledger = AgentLedger()
        #: why a pending agent could not be imported here (its scenarios cannot run)
        self.import_problem: ConfigError | None = None

    @pytest.hookimpl(wrapper=True)
    def pytest_fixture_setup(
        self, fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
    ) -> Generator[None, object, object]:
        if fixturedef.argname == FIXTURE_NAME:
            self.fixture_scope = request.scope
            file = _fixture_file(fixturedef.func)
            user = fixturedef.func.__module__ != _DEFAULT_FIXTURE_MODULE
            self.fixture_given = (
                f"{_shown(file, self.rootpath)}::{FIXTURE_NAME}" if user and file else None
            )
        return (yield)

    def import_pending(self, spec_source: str) -> AgentSource | None:
        """Import the agent when its source is still pending (:func:`import_agent_source`:
        ``ConfigError`` for one that cannot be loaded); returns the source, imported."""
        if self.source is not None and self.source.pending:
            try:
                self.source = import_agent_source(self.source, spec_source)
            except ConfigError as error:
                self.import_problem = error
                raise
            self.identity = self.source.identity
        return self.source

    @property
    def starts_ahead(self) -> bool:
        """Whether scenarios may start before their tests (decided at the first scenario)."""
        return self.mode in ("configured", "shared")

    def accept(self, nodeid: str, value: object) -> None:
        """Take the ``tau2_agent`` fixture's value for test ``nodeid``, before its scenario
        is asked for. Fails the test (``pytest.fail``) for a value that cannot work, or a
        fixture other than the one the run named at start-up (its records would credit another
        agent)."""
        problem = self._other_fixture()
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        scope = self.fixture_scope or "function"
        source = self.source.identity.source if self.source else FIXTURE_SOURCE
        mode: Mode
        if value is None:
            mode = "configured"
        elif agent_style(value) is not None and not isinstance(value, type):
            if scope != "function":
                pytest.fail(
                    f"the {scope}-scoped {FIXTURE_NAME} fixture returned an agent object: every "
                    "scenario would share it; return a factory (e.g. the agent's class, or a "
                    "function that makes one) or make the fixture function-scoped",
                    pytrace=False,
                )
            mode = "per_item"
            agent = value
            self._remember(AgentIdentity.of(source, agent, fixture=True))
            self._per_item[nodeid] = self._runner(lambda: agent, self.identity_or(source))
        elif callable(value):
            factory: AgentFactory = value
            self._remember(AgentIdentity.of(source, value, fixture=True))
            if scope == "function":
                mode = "per_item"
                self._per_item[nodeid] = self._runner(factory, self.identity_or(source))
            else:
                mode = "shared"
                self._shared = factory
        else:
            pytest.fail(
                f"the {FIXTURE_NAME} fixture returned a {type(value).__name__}; expected an "
                "agent (respond or converse), a factory of agents, or None",
                pytrace=False,
            )
        if self.mode is None:
            self.mode = mode
        elif self.mode != mode:
            pytest.fail(
                f"the {FIXTURE_NAME} fixture gave this test a different kind of agent "
                f"({mode}) than the earlier scenarios of this process ({self.mode}); give every "
                "scenario its agent the same way",
                pytrace=False,
            )

    def _other_fixture(self) -> str | None:
        """Why the fixture this test got is not the agent the run named, or None."""
        named = self.source.identity.source if self.source and self.source.is_fixture else None
        given = self.fixture_given
        if given == named:
            return None
        if given is None:
            return (
                f"{named} does not reach the scenarios: their tests got the plugin's own "
                f"{FIXTURE_NAME} fixture (pytest gives a conftest's fixtures only to the tests "
                f"below its folder); define it in {self.rootpath / 'conftest.py'} (the "
                "rootdir's) or in a plugin module"
            )
        started = (
            f"the fixture {named}"
            if named
            else (f"the agent {self.source.identity.source}" if self.source else "the agent model")
        )
        return (
            f"the scenarios get the {FIXTURE_NAME} fixture of {given}, but the run started "
            f"with {started} (the fixture's conftest was not loaded then): define the fixture "
            f"in {self.rootpath / 'conftest.py'} (the rootdir's) or in a plugin module, and "
            "name no other agent"
        )

    def _remember(self, identity: AgentIdentity) -> None:
        if self.identity is None or self.identity.name is None:
            self.identity = identity

    def identity_or(self, source: str) -> AgentIdentity:
        return self.identity or AgentIdentity(source=source, fixture=True)

    def runner(self, nodeid: str) -> AgentRunner | None:
        """A fresh agent for the scenario of ``nodeid`` (None: the agent model)."""
        runner = self._per_item.pop(nodeid, None)
        if runner is not None:
            return runner
        if self._shared is not None:
            return self._runner(self._shared, self.identity_or(FIXTURE_SOURCE))
        if self.source is not None and self.source.factory is not None:
            return self._runner(self.source.factory, self.source.identity)
        if self.source is not None and self.source.pending:
            # never another agent in its place; the run stops at its collection before this
            raise self.import_problem or ConfigError(
                f"the agent {self.source.identity.source} was not imported in this process"
            )
        return None

    def _runner(self, factory: AgentFactory, identity: AgentIdentity) -> AgentRunner:
        return AgentRunner(factory, identity, ledger=self.ledger)

    @staticmethod
    def after(runner: AgentRunner, notices: list[str]) -> None:
        """Once its scenario is over: a line for ``notices`` when the agent's async code
        blocked its event loop, or when the agent declares a model its factory did not (the
        same line for every scenario: said once per run)."""
        lines = []
        source = runner.identity.source
        if runner.longest_block >= BLOCKING_STEP_SECONDS:
            lines.append(
                f"tau2: agent {source} blocks its event loop: a step of its "
                f"async code ran {BLOCKING_STEP_SECONDS:g} s or more without awaiting "
                "(time.sleep or blocking I/O inside async def); it runs on a loop of its own, so "
                "it slows only its own scenario, within --tau2-max-duration (docs/agents.md)"
            )
        if runner.unseen_model is not None:
            fix = (
                "declare it on the class (model = ...) or name a function that makes the agent"
                if runner.factory_is_class
                else "return the agent itself from the fixture, or declare model on its class"
            )
            lines.append(
                f"tau2: agent {source} sets model {runner.unseen_model!r} on the agents it "
                f"makes, but the run reads the model from the factory itself "
                f"({runner.identity.model or 'none'}), before any agent exists: the records and "
                f"--tau2-prices do not see it; {fix} (docs/agents.md#what-your-agent-costs)"
            )
        notices.extend(line for line in lines if line not in notices)


AGENTS_KEY = pytest.StashKey[AgentSupply]()
