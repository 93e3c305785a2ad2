"""The documentation: the generated configuration tables, the README's shape, and the commands a
user copies from the pages.

A fenced ``sh`` block right after the line ``<!-- tau2:user-commands -->`` holds commands that
work from a user's repository after ``pip install``; a test runs each such block in a scratch
repository against the installed wheel. A block after ``<!-- tau2:local-server -->`` holds
commands against a model server at ``http://127.0.0.1:8080/v1``: the test runs it the same way
with a loopback server standing in for it. A block after ``<!-- tau2:checkout -->`` runs in
this checkout. ``docs/development.md`` states the convention for writers.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from tau2_retail.data.tasks import Task, load_user_guidelines
from tau2_retail.settings import OPTIONS
from tau2_retail.testing.bench import hermetic_environ
from tau2_retail.testing.scripted_endpoint import ScriptedEndpoint
from tau2_retail.testing.timeouts import scaled_timeout

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
USER_COMMANDS = "<!-- tau2:user-commands -->"
LOCAL_SERVER = "<!-- tau2:local-server -->"
LOCAL_SERVER_URL = "http://127.0.0.1:8080/v1"
CHECKOUT = "<!-- tau2:checkout -->"
# pages about working on this checkout: their commands run here, not in a user's repository
CHECKOUT_PAGES = frozenset({"development.md", "performance.md"})
# pages other engineers are writing now; the README links them already
PENDING_PAGES: frozenset[str] = frozenset()

# a fence may be indented (a block inside a list item)
_FENCE = re.compile(r"^\s*```(\w*)\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """A fenced code block of a page, with the marker line just before it (if any)."""

    page: str
    line: int
    language: str
    marker: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced code block of a page of this checkout."""
    return parse_blocks(path.read_text(encoding="utf-8"), page=path.relative_to(ROOT).as_posix())


def parse_blocks(text: str, *, page: str) -> list[Block]:
    """Every fenced code block of a Markdown text, with the marker line before it (blank lines
    between the marker and the fence allowed)."""
    found: list[Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        before = index - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = lines[before].strip() if before >= 0 else ""
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        found.append(
            Block(
                page=page,
                line=index + 1,
                language=opening[1],
                marker=marker if marker.startswith("<!-- tau2:") else "",
                text=textwrap.dedent("\n".join(lines[index + 1 : end])),
            )
        )
        index = end + 1
    return found


def user_facing_pages() -> list[Path]:
    pages = [p for p in sorted(DOCS.glob("*.md")) if p.name not in CHECKOUT_PAGES]
    return [README, *pages]


def all_blocks(paths: list[Path]) -> list[Block]:
    return [block for path in paths for block in blocks(path)]


def load_hook() -> ModuleType:
    """The docs' MkDocs hook that renders the configuration page's tables."""
    spec = importlib.util.spec_from_file_location(
        "tau2_docs_options_table", DOCS / "hooks" / "options_table.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- the configuration page -------------------------------------------------------------------


def test_the_configuration_page_is_generated_from_the_options_table() -> None:
    hook = load_hook()
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert hook.MARKER in page
    # no hand-written row that could drift: every option row comes from the hook
    assert not re.search(r"^\| `--tau2-", page, flags=re.MULTILINE)

    rendered = hook.on_page_markdown(page, page=None, config=None, files=None)
    rows = [line for line in rendered.splitlines() if line.startswith("| `--tau2-")]
    assert len(rows) == len(OPTIONS)
    # rows ordered by their flag (a whole row sorts `--tau2-agent` after `--tau2-agent-...`)
    by_flag = sorted(rows, key=lambda row: row.strip("| ").split("`")[1])
    for setting, row in zip(sorted(OPTIONS, key=lambda s: s.flag), by_flag, strict=True):
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert cells[0] == f"`{setting.flag}`"
        assert cells[1] == f"`{setting.dest}`"
        assert cells[2] == (f"`{setting.env_var}`" if setting.env_var else "")
        if getattr(setting, "default_note", None):
            assert cells[3] == "see `--help`"
        else:
            assert cells[3] == (f"`{setting.default}`" if setting.default else "unset")
        assert setting.help.replace("|", "\\|") in row
        assert cells[5] == (f"`{setting.cli_flag}`" if setting.cli else "")


def test_every_environment_variable_and_ini_key_is_on_the_page() -> None:
    rendered = load_hook().options_markdown()
    for setting in OPTIONS:
        assert f"`{setting.dest}`" in rendered
        if setting.env_var:
            assert f"`{setting.env_var}`" in rendered
    assert "TAU2_TRIALS" not in rendered  # only the settings that read the environment


# a misspelling a page shows on purpose (configuration.md: what pytest answers to it)
MISSPELLED_ON_PURPOSE = frozenset({"--tau2-task"})
# a whole option name (``--tau2-<role>-timeout`` stands for each role's); a prefix such as
# ``--tau2-user-*`` is no name
_NAMED_OPTION = re.compile(r"--tau2-(?:<role>-)?[a-z0-9]+(?:-[a-z0-9]+)*(?![-a-z0-9<*])")


def named_options(text: str) -> set[str]:
    """Every ``--tau2-*`` option a text names, ``<role>`` spelled out for each role."""
    named: set[str] = set()
    for name in _NAMED_OPTION.findall(text):
        named |= {name.replace("<role>", role) for role in ("agent", "user", "judge")}
    return named


def test_the_option_reader_spells_out_roles_and_skips_prefixes() -> None:
    text = "`--tau2-<role>-timeout`, `--tau2-user-*`, `--tau2-shard=1/2`, --tau2-tasks 5"
    assert named_options(text) == {
        "--tau2-agent-timeout",
        "--tau2-user-timeout",
        "--tau2-judge-timeout",
        "--tau2-shard",
        "--tau2-tasks",
    }


def test_every_option_the_pages_name_exists() -> None:
    """models.md named ``--tau2-<role>-seed``, an option no version had."""
    pages = [README, *sorted(DOCS.glob("*.md")), *sorted((ROOT / "examples").glob("*.py"))]
    named = set().union(*(named_options(page.read_text(encoding="utf-8")) for page in pages))
    flags = {setting.flag for setting in OPTIONS}
    assert sorted(named - flags - MISSPELLED_ON_PURPOSE) == []


# --- the README -------------------------------------------------------------------------------


def test_the_readme_is_short_and_in_the_order_a_newcomer_reads_it() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    headings = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert headings == [
        "The two commands",
        "Use it in your repository",
        "Test your own agent",
        "Point it at a model",
        "The CI gate",
        "Documentation",
    ]
    agent = text[text.index("## Test your own agent") : text.index("## Point it at a model")]
    assert agent.index("tau2_agent") < agent.index("--tau2-agent=package.module:factory")
    assert "respond(messages, tools)" in agent
    assert "converse(messages, toolbox)" in agent


def test_the_readme_states_how_long_the_test_command_takes() -> None:
    # a newcomer must know what they start: the whole `tox`, and the quick tier offered first
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The two commands") : text.index("## Use it in your repository")]
    after = section[section.index("<!-- tau2:checkout -->") :].split("```")[2]
    assert re.search(r"takes about \d+ minutes on 2 cores", after), after
    assert re.search(r"`tox -e fast`[^.]*in about \d+ minutes", after), after


README_SAMPLE_INTRO = "The first command prints:"
# what differs between two runs of the same command: the run id and the folder it writes
_RUN_FOLDER = [
    (re.compile(r"^tau2: run \S+ -> .*$"), "tau2: run RUN_ID -> FOLDER/RUN_ID"),
    (re.compile(r"^run directory: .*$"), "run directory: FOLDER/RUN_ID"),
    (re.compile(r"^report: .*$"), "report: FOLDER/RUN_ID/report.html"),
]


def _normalized(line: str) -> str:
    for pattern, replacement in _RUN_FOLDER:
        line = pattern.sub(replacement, line)
    return line


def readme_sample_output() -> list[str]:
    """The README's sample of the first command's output, normalized, without its ``...``
    (pytest's own lines)."""
    text = README.read_text(encoding="utf-8")
    after = text[text.index(README_SAMPLE_INTRO) :]
    sample = next(block for block in parse_blocks(after, page="README.md") if not block.language)
    return [_normalized(line) for line in sample.text.splitlines() if line != "..."]


def sample_of_run(output: list[str]) -> list[str]:
    """What the README's sample shows of a real run's output, normalized: the run header's
    ``tau2:`` lines and the whole ``tau2 retail`` section (not pytest's closing line)."""
    start = next(i for i, line in enumerate(output) if line.endswith(" tau2 retail " + "=" * 34))
    header = [line for line in output[:start] if line.startswith("tau2:")]
    section = output[start:]
    end = next((i for i, line in enumerate(section[1:], 1) if line.startswith("=")), len(section))
    return [_normalized(line) for line in [*header, *section[:end]]]


def test_the_readme_sample_reader_keeps_what_a_run_says() -> None:
    run = [
        "collected 2 items",
        "tau2: agent builtin:oracle; user builtin:customer; judge none",
        "tau2: run oracle -> /tmp/x/runs/oracle",
        "..",
        "=" * 32 + " tau2 retail " + "=" * 34,
        "Overall success rate: 100.00% (2/2 scenarios) [34.2, 100.0]",
        "report: /tmp/x/runs/oracle/report.html",
        "=" * 30 + " 2 passed in 1.00s " + "=" * 31,
    ]
    assert sample_of_run(run) == [
        "tau2: agent builtin:oracle; user builtin:customer; judge none",
        "tau2: run RUN_ID -> FOLDER/RUN_ID",
        "=" * 32 + " tau2 retail " + "=" * 34,
        "Overall success rate: 100.00% (2/2 scenarios) [34.2, 100.0]",
        "report: FOLDER/RUN_ID/report.html",
    ]
    assert "tau2: OFFLINE SELF-CHECK" in " ".join(readme_sample_output())


def test_the_readme_links_pages_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text)}
    local = {t for t in targets if not t.startswith(("http://", "https://"))}
    assert "docs/configuration.md" in local
    missing = sorted(t for t in local - PENDING_PAGES if not (ROOT / t).exists())
    assert missing == []


def test_the_home_page_links_every_page() -> None:
    """Issue 27, item 7: the index linked neither the agents, statistics, cost nor integrity
    pages."""
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {link.split("#")[0] for link in re.findall(r"\]\(([\w-]+\.md)(?:#[\w-]*)?\)", index)}
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert sorted(pages - linked) == []


def test_every_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p.name for p in DOCS.glob("*.md")}
    listed = set(re.findall(r":\s+([\w-]+\.md)\s*$", nav, flags=re.MULTILINE))
    assert listed == pages


# --- commands in the pages --------------------------------------------------------------------


def test_user_facing_commands_select_the_installed_benchmark() -> None:
    """Every pytest command with ``-k tau2_retail`` (in a fenced block or an indented one) is
    in a block marked as run in the checkout; docs/statistics.md's worked example was not."""
    offending = []
    for page in user_facing_pages():
        in_checkout = {
            block.line + offset
            for block in blocks(page)
            if block.marker == CHECKOUT
            for offset in range(1, len(block.text.splitlines()) + 1)
        }
        offending += [
            f"{page.name}:{number}"
            for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
            if line.strip().startswith(("pytest ", "python -m pytest "))
            and "-k tau2_retail" in line
            and number not in in_checkout
        ]
    assert offending == [], "use --pyargs tests_tau2_retail outside the checkout"


# options whose value is a file or folder: written with a space, an existing path is taken by
# pytest for a test path when it chooses its rootdir and configuration file
PATH_FLAGS = sorted({setting.flag for setting in OPTIONS if setting.path} | {"--tau2-cache"})


def test_path_options_are_written_with_an_equals_sign() -> None:
    """Issue 31, item 6: ``--tau2-cache .tau2/cache.sqlite`` in a CI recipe failed outside this
    repository once the file existed."""
    assert "--tau2-output-dir" in PATH_FLAGS
    spaced = re.compile("|".join(rf"{re.escape(flag)}[ \t]" for flag in PATH_FLAGS))
    pages = [README, *sorted(DOCS.glob("*.md"))]
    assert [b.id for b in all_blocks(pages) if spaced.search(b.text)] == []


def test_markers_stand_before_shell_blocks() -> None:
    marked = [b for b in all_blocks([README, *sorted(DOCS.glob("*.md"))]) if b.marker]
    assert {b.marker for b in marked} <= {USER_COMMANDS, LOCAL_SERVER, CHECKOUT}
    assert all(b.language == "sh" for b in marked), [b.id for b in marked]


def test_the_block_reader_finds_markers_and_commands() -> None:
    text = (
        f"text\n\n{USER_COMMANDS}\n\n```sh\necho one\n```\n\n```toml\na = 1\n```\n"
        "\n- a list item:\n\n  ```bash\n  echo two\n    indented\n  ```\n"
    )
    found = parse_blocks(text, page="page.md")
    assert [(b.language, b.marker, b.text, b.line) for b in found] == [
        ("sh", USER_COMMANDS, "echo one", 5),
        ("toml", "", "a = 1", 9),
        ("bash", "", "echo two\n  indented", 15),
    ]


USER_BLOCKS = [b for b in all_blocks(user_facing_pages()) if b.marker == USER_COMMANDS]
LOCAL_SERVER_BLOCKS = [b for b in all_blocks(user_facing_pages()) if b.marker == LOCAL_SERVER]


def test_the_pages_hold_user_commands() -> None:
    pages = {block.page for block in USER_BLOCKS}
    assert {"README.md", "docs/data.md", "docs/cli.md", "docs/ci.md"} <= pages
    assert any("--pyargs tests_tau2_retail" in block.text for block in USER_BLOCKS)
    assert {block.page for block in LOCAL_SERVER_BLOCKS} == {"docs/local-servers.md"}
    assert all(LOCAL_SERVER_URL in block.text for block in LOCAL_SERVER_BLOCKS)


def as_run_here(command_block: str, data_dir: Path) -> str:
    """The block as the test runs it: the one download becomes a copy of the local data (the
    tests never use the network), and more than two workers become two (a 2-core machine)."""
    text = re.sub(
        r"(python -m tau2_retail data fetch)[ \t]*(?=$|#)",
        rf"\1 --from {data_dir} ",
        command_block,
        flags=re.MULTILINE,
    )
    return re.sub(r"(?<=\s)-n\s+([3-9]|\d\d+)\b", "-n 2", text)


def test_the_rewrites_keep_the_commands() -> None:
    data = Path("/data")
    assert as_run_here("python -m tau2_retail data fetch  # once", data) == (
        "python -m tau2_retail data fetch --from /data # once"
    )
    assert as_run_here("python -m tau2_retail data fetch --from X", data) == (
        "python -m tau2_retail data fetch --from X"
    )
    assert as_run_here("pytest -n 8 --tau2-tasks=0", data) == "pytest -n 2 --tau2-tasks=0"
    assert as_run_here("pytest -n 2 -n 16", data) == "pytest -n 2 -n 2"


SCRATCH_PYPROJECT = """\
[project]
name = "your-agent"
version = "0.1.0"

[tool.pytest.ini_options]
filterwarnings = ["error"]
"""


@pytest.fixture
def scratch_repository(tmp_path: Path) -> Path:
    """A user's repository: its own ``pyproject.toml`` and a test of its own."""
    repo = tmp_path / "your-repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(SCRATCH_PYPROJECT, encoding="utf-8")
    (repo / "tests" / "test_your_agent.py").write_text(
        "def test_your_agent():\n    assert True\n", encoding="utf-8"
    )
    return repo


def _dependency_tests(tmp_path: Path) -> Path:
    """A site folder holding a top-level ``tests`` package, as some dependencies install: under
    ``--pyargs`` pytest reads ``tests`` as that module (README's ``pytest tests --pyargs ...``
    ran it instead of the team's tests); ``tests/`` is the folder."""
    site = tmp_path / "dependency-site"
    (site / "tests").mkdir(parents=True)
    (site / "tests" / "__init__.py").write_text("", encoding="utf-8")
    (site / "tests" / "test_dependency.py").write_text(
        "def test_of_a_dependency():\n    raise AssertionError('a dependency\\'s tests ran')\n",
        encoding="utf-8",
    )
    return site


def _run_as_a_user(
    block: Block, script: str, repository: Path, installed: Path, data_dir: Path, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` (``block`` rewritten) with ``bash`` in a user's ``repository``, the wheel
    installed and the data fetched into an empty cache; fails the test when it fails."""
    env = hermetic_environ(data_dir)
    # a user's machine: no data folder named, an empty data cache that data fetch fills
    del env["TAU2_DATA_DIR"]
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["HOME"] = str(tmp_path / "home")
    # the wheel first (its modules and entry point win over this checkout's), `python` on PATH
    # is this environment's interpreter, which holds the runtime dependencies
    env["PYTHONPATH"] = os.pathsep.join([str(installed), str(_dependency_tests(tmp_path))])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if "data fetch" not in block.text:
        subprocess.run(
            [sys.executable, "-m", "tau2_retail", "data", "fetch", "--from", str(data_dir)],
            cwd=repository,
            env=env,
            check=True,
            capture_output=True,
            timeout=scaled_timeout(120),
        )
    script = "set -euo pipefail\n" + script
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=repository,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled_timeout(600),
    )
    assert result.returncode == 0, (
        f"{block.id} failed (exit {result.returncode}):\n{script}\n{result.stdout}\n{result.stderr}"
    )
    # nothing was read from or written into this checkout
    assert str(ROOT) not in result.stdout
    return result


@pytest.mark.tau2_subprocess
@pytest.mark.parametrize("block", USER_BLOCKS, ids=lambda block: block.id)
def test_user_commands_run_from_a_scratch_repository(
    block: Block, scratch_repository: Path, installed: Path, data_dir: Path, tmp_path: Path
) -> None:
    script = as_run_here(block.text, data_dir)
    _run_as_a_user(block, script, scratch_repository, installed, data_dir, tmp_path)


@pytest.mark.tau2_subprocess
@pytest.mark.parametrize("block", LOCAL_SERVER_BLOCKS, ids=lambda block: block.id)
def test_local_server_commands_run_against_a_stand_in_server(
    block: Block,
    scratch_repository: Path,
    installed: Path,
    data_dir: Path,
    tmp_path: Path,
    tasks: Mapping[str, Task],
) -> None:
    # the loopback server plays the model (a gold-acting agent, the scripted customer)
    endpoint = ScriptedEndpoint(tasks, load_user_guidelines(data_dir))
    with endpoint.server:
        script = as_run_here(block.text, data_dir).replace(LOCAL_SERVER_URL, endpoint.base_url)
        _run_as_a_user(block, script, scratch_repository, installed, data_dir, tmp_path)
    assert {request.role for request in endpoint.log} >= {"agent", "user"}
    # no key was read: the placeholder went as the bearer key
    keys = {request.header("authorization") for request in endpoint.server.requests}
    assert keys == {"Bearer EMPTY"}
