"""Guards on the architecture: one folder per concept, imports pointing down the layers.

The order is DESIGN.md's, refined inside ``tau2_retail``: each layer may import itself and the
layers below it, never above. No file is exempt by name.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path, PurePosixPath

import pytest

from tests.package_tree import ROOT, mapped_folders, package_sources

# bottom to top; a layer may import the layers listed before it (and itself)
LAYERS = (
    "errors",
    "codec",
    "tools",
    "data",
    "models",
    "engine",
    "results",
    "tau2_format",
    "report",
    "settings",
    "cli",
    "plugins",
)
# helpers for tests and benchmarks: they may use every layer, and no layer may use them
TESTING = "testing"
# the top-level modules of the package and where they sit: ``__init__`` is the public surface
# (it re-exports the agent contract of ``models`` and ``errors``), so it sits on top
TOP_MODULES = {"__init__": "plugins", "__main__": "cli"}
# data only (the pinned manifest): no code, so any layer may import it to find its files
DATA_FOLDERS = {"fixtures"}


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _layer_of(relative: PurePosixPath) -> str:
    first = relative.parts[0]
    if first.endswith(".py"):
        stem = first[:-3]
        return TOP_MODULES.get(stem, stem)
    return first


def _sources() -> list[tuple[PurePosixPath, Path]]:
    """Every module of the package (``src/tau2_retail`` and the mapped top-level ``tools``,
    ``plugins`` and ``fixtures``), by its path inside the installed package."""
    return list(package_sources())


def test_the_guard_sees_every_layer() -> None:
    seen = {_layer_of(relative) for relative, _path in _sources()}
    assert {*LAYERS, TESTING} <= seen
    assert any(relative.parts[0] == "plugins" for relative, _path in _sources())


def test_every_folder_is_a_known_layer() -> None:
    folders = {relative.parts[0] for relative, _path in _sources() if len(relative.parts) > 1}
    assert folders == {*LAYERS[2:], TESTING, *DATA_FOLDERS}
    modules = {relative.stem for relative, _path in _sources() if len(relative.parts) == 1}
    assert modules == {*LAYERS[:2], *TOP_MODULES}


@pytest.mark.parametrize("layer", [*LAYERS, TESTING])
def test_imports_point_down_the_layers(layer: str) -> None:
    # each layer may import itself; testing may import every layer
    allowed = {*LAYERS, TESTING} if layer == TESTING else set(LAYERS[: LAYERS.index(layer) + 1])
    wrong = []
    for relative, path in _sources():
        if _layer_of(relative) != layer:
            continue
        for name in _imported_modules(path):
            parts = name.split(".")
            if parts[0] != "tau2_retail" or len(parts) < 2:
                continue
            if parts[1] in DATA_FOLDERS:  # data, found through its package: any layer
                continue
            if parts[1] not in allowed and TOP_MODULES.get(parts[1]) not in allowed:
                wrong.append(f"tau2_retail/{relative} imports {name}")
    assert not wrong, "\n".join(wrong)


# the checkout's own Python beside the package: each imports the package by its installed names
_CHECKOUT_CODE = ("conftest.py", "tests", "tests_tau2_retail", "benchmarks", "examples")


def _checkout_modules() -> list[Path]:
    found = [path for _relative, path in _sources()]
    for name in _CHECKOUT_CODE:
        where = ROOT / name
        found.extend([where] if where.is_file() else sorted(where.rglob("*.py")))
    return found


def test_nothing_imports_a_mapped_folder_by_its_folder_name() -> None:
    """``tools/``, ``plugins/`` and ``fixtures/`` are ``tau2_retail.tools``, ``.plugins`` and
    ``.fixtures``: ``import tools`` works only where the checkout's root is on ``sys.path``
    (pytest's rootdir), and there it loads a second copy of each module, whose classes are not
    the package's (``tools.store.Store is not tau2_retail.tools.store.Store``)."""
    folders = {folder.relative_to(ROOT).parts[0] for folder in mapped_folders().values()}
    wrong = []
    for path in _checkout_modules():
        for name in _imported_modules(path):
            if name.split(".")[0] in folders:
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)


def test_tools_uses_the_standard_library_only() -> None:
    foreign = []
    for relative, path in _sources():
        if _layer_of(relative) != "tools":
            continue
        for name in _imported_modules(path):
            top = name.split(".")[0]
            if name.startswith("tau2_retail.tools") or top == "__future__":
                continue
            if top not in sys.stdlib_module_names:
                foreign.append(f"tau2_retail/{relative} imports {name}")
    assert not foreign, "\n".join(foreign)


def test_the_runtime_never_imports_test_only_packages() -> None:
    """aiohttp is a test dependency: only ``tau2_retail.testing`` may use it."""
    offenders = [
        str(relative)
        for relative, path in _sources()
        if _layer_of(relative) != TESTING
        and any(n.split(".")[0] == "aiohttp" for n in _imported_modules(path))
    ]
    assert not offenders


# -- the profile is a strategy ------------------------------------------------------------------

PROFILES = PurePosixPath("engine", "profiles")
# the per-profile implementations: only their package names them
_PROFILE_CLASSES = frozenset({"DefaultPolicy", "Tau2Policy", "MixedPolicy"})
# flags a consumer would branch on (issue 27 item 4: the profile's methods answer instead)
_PROFILE_FLAGS = frozenset(
    {"reward_is_headline", "clean_exit_applies", "takes_agent_notes", "signals_label"}
)


def _names_a_profile(node: ast.expr) -> bool:
    """``profile``, ``summary.profile``, ``settings.profile_name``, ``ProfileName.X``."""
    if isinstance(node, ast.Name):
        return "profile" in node.id.lower()
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id == "ProfileName":
            return True
        return "profile" in node.attr.lower()
    return False


def _is_a_profile_constant(node: ast.expr) -> bool:
    """A literal (``"tau2"``), a ``ProfileName`` member, or a collection of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Attribute):
        if node.attr == "value":  # ProfileName.TAU2.value
            return _is_a_profile_constant(node.value)
        return isinstance(node.value, ast.Name) and node.value.id == "ProfileName"
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_a_profile_constant(element) for element in node.elts)
    return False


def profile_questions(source: str, where: str) -> list[str]:
    """Each place in ``source`` that asks which profile it is, instead of asking the profile:
    a comparison of a profile with a given one, ``ProfileName.TAU2``, or a profile's class."""
    found = []
    for node in ast.walk(ast.parse(source, filename=where)):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(_names_a_profile, operands)) and any(map(_is_a_profile_constant, operands)):
                found.append(f"{line}: compares a profile with a given one")
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "ProfileName"
            and node.attr != "DEFAULT"
        ):
            found.append(f"{line}: names ProfileName.{node.attr}")
        elif isinstance(node, ast.Name) and node.id in _PROFILE_CLASSES:
            found.append(f"{line}: names the profile class {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in ("is_tau2", "is_default"):
            found.append(f"{line}: asks .{node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr in _PROFILE_FLAGS:
            found.append(f"{line}: reads the profile flag .{node.attr} and decides for it")
    return found


def test_only_the_profiles_know_which_profile_is_running() -> None:
    """Issue 20, item 1: a profile owns its decisions (prompts, tools, requests, judge,
    endings, score, failure reasons, headline); the rest asks it, never "is this tau2?"."""
    found = []
    for relative, path in _sources():
        if relative.is_relative_to(PROFILES):
            continue
        found += profile_questions(path.read_text(encoding="utf-8"), str(relative))
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "if summary.profile == ProfileName.TAU2: pass",
        "tau2 = profile is ProfileName.TAU2",
        "if self.metrics.profile != 'tau2': pass",
        "if self.metrics.profile == ProfileName.TAU2.value: pass",
        "if settings.profile in ('tau2', 'default'): pass",
        "if isinstance(policy, Tau2Policy): pass",
        "x = ProfileName.TAU2",
        "if profile.is_tau2: pass",
        "if policy_for(summary.profile).reward_is_headline: pass",
        "if not policy.clean_exit_applies: lines.pop()",
        "x = MixedPolicy()",
    ],
)
def test_the_profile_guard_sees_each_form_of_the_question(source: str) -> None:
    assert profile_questions(source, "example.py")


@pytest.mark.parametrize(
    "source",
    [
        "if profile is None: pass",
        "if baseline.profile != summary.profile: pass",
        "lines = policy_for(summary.profile).headline(reward=reward, signals=rates)",
        "profile = configured or ProfileName.DEFAULT.value",
        "if name == 'profile': pass",
    ],
)
def test_the_profile_guard_lets_the_profile_be_asked(source: str) -> None:
    assert not profile_questions(source, "example.py")
