"""The scenario-folder writer process: the same files as in this process, every answer after
the folder is on disk, errors named, and a child that is gone never loses a folder."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tau2_retail.errors import ArtifactError
from tau2_retail.results import folder_writer, scenario_folder
from tau2_retail.results.atomic import TEMP_PREFIX, dumps_json
from tau2_retail.results.folder_writer import FolderWriter
from tau2_retail.results.long_text import LONG_TEXT_CHARS, cut_long_text
from tau2_retail.results.scenario_folder import (
    JsonDocument,
    ScenarioFiles,
    file_bytes,
    put_scenario_files,
)


def _folder(directory: Path, marker: str = "a") -> ScenarioFiles:
    return ScenarioFiles(
        directory=directory,
        files=(
            ("transcript.json", f'{{"m": "{marker}"}}\n'.encode()),
            ("scenario_config/tools.json", b"[]\n"),
            ("conversation_log.txt", "caf\u00e9 \u2014 ok\n".encode()),
            ("metrics.json", b'{"done": true}\n'),
        ),
        stale=("judge_result.json", "metrics.set-aside.json"),
    )


def _tree(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.asyncio
async def test_the_child_writes_what_this_process_writes(tmp_path: Path) -> None:
    writer = await FolderWriter.start()
    assert writer.in_child
    try:
        written = await writer.put(_folder(tmp_path / "child" / "s1"))
    finally:
        await writer.aclose()
    put_scenario_files(_folder(tmp_path / "here" / "s1"))
    assert written == tmp_path / "child" / "s1"
    assert _tree(tmp_path / "child") == _tree(tmp_path / "here")
    assert set(_tree(tmp_path / "child")) == {
        "s1/transcript.json",
        "s1/scenario_config/tools.json",
        "s1/conversation_log.txt",
        "s1/metrics.json",
    }


def test_a_files_content_is_its_bytes_a_utf8_text_or_an_artifact_json_document() -> None:
    long = "x" * (LONG_TEXT_CHARS + 5)
    document = {"t": "caf\u00e9", "n": [1, 2.5, None, True], "long": long}
    assert file_bytes(b"raw\x00") == b"raw\x00"
    assert file_bytes("caf\u00e9 \ud800") == "caf\u00e9 \ufffd".encode()  # a lone surrogate
    assert file_bytes(JsonDocument(document)) == (dumps_json(document)).encode()
    cut = json.loads(file_bytes(JsonDocument(document, cut=True)))
    assert cut["t"] == "caf\u00e9"
    assert cut["long"] == cut_long_text(long) != long


@pytest.mark.asyncio
async def test_the_child_encodes_the_json_documents_off_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the point of sending documents rather than bytes: the indented encoding (pure Python)
    # runs on the child's core; this process cannot encode one here and the folder is written
    document = {"messages": [{"role": "user", "content": "hi \u2014 there"}], "n": 1.5}
    folder = ScenarioFiles(
        directory=tmp_path / "child" / "s1",
        files=(("transcript.json", JsonDocument(document)), ("metrics.json", JsonDocument({}))),
        stale=(),
    )
    writer = await FolderWriter.start()
    try:
        with monkeypatch.context() as patched:
            patched.setattr(scenario_folder.atomic, "dumps_json", _no_encoding_here)
            await writer.put(folder)
    finally:
        await writer.aclose()
    assert (tmp_path / "child" / "s1" / "transcript.json").read_text(encoding="utf-8") == (
        dumps_json(document)
    )
    assert (tmp_path / "child" / "s1" / "metrics.json").read_text(encoding="utf-8") == "{}\n"


@pytest.mark.asyncio
async def test_a_document_the_pipe_cannot_carry_is_written_here(tmp_path: Path) -> None:
    class Local(dict[str, int]):  # JSON encodes it; pickle cannot find a local class
        pass

    folder = ScenarioFiles(
        directory=tmp_path / "s1",
        files=(("metrics.json", JsonDocument(Local(a=1))),),
        stale=(),
    )
    writer = await FolderWriter.start()
    try:
        assert await writer.put(folder) == tmp_path / "s1"
        assert writer.in_child  # the child still takes the next folder
        await writer.put(_folder(tmp_path / "s2"))
    finally:
        await writer.aclose()
    assert (tmp_path / "s1" / "metrics.json").read_text(encoding="utf-8") == '{\n "a": 1\n}\n'
    assert (tmp_path / "s2" / "metrics.json").is_file()


def _no_encoding_here(value: object) -> str:
    raise AssertionError("the JSON documents are encoded in the child process")


@pytest.mark.asyncio
async def test_the_child_removes_stale_files_and_an_earlier_attempts_temporaries(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "s1"
    (directory / "scenario_config").mkdir(parents=True)
    (directory / "judge_result.json").write_text("{}")
    (directory / f"{TEMP_PREFIX}transcript.json.1-0").write_text("half")
    (directory / "scenario_config" / f"{TEMP_PREFIX}tools.json.1-1").write_text("half")
    writer = await FolderWriter.start()
    try:
        await writer.put(_folder(directory))
    finally:
        await writer.aclose()
    assert sorted(_tree(directory)) == [
        "conversation_log.txt",
        "metrics.json",
        "scenario_config/tools.json",
        "transcript.json",
    ]


@pytest.mark.asyncio
async def test_a_refused_write_is_an_artifact_error_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where the run's folder should be")
    writer = await FolderWriter.start()
    try:
        with pytest.raises(ArtifactError, match=r"blocker/s1"):
            await writer.put(_folder(tmp_path / "blocker" / "s1"))
        # a linked scenario folder would lead the writes outside the run
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "linked").symlink_to(tmp_path / "elsewhere")
        with pytest.raises(ArtifactError, match="symbolic link"):
            await writer.put(_folder(tmp_path / "linked"))
        # the child is still there for the next folder
        await writer.put(_folder(tmp_path / "ok"))
        assert writer.in_child
    finally:
        await writer.aclose()
    assert (tmp_path / "ok" / "metrics.json").exists()
    assert not any((tmp_path / "elsewhere").iterdir())


@pytest.mark.asyncio
async def test_each_put_returns_once_its_folder_is_on_disk(tmp_path: Path) -> None:
    writer = await FolderWriter.start()
    folders = [_folder(tmp_path / f"s{i}", marker=str(i)) for i in range(60)]

    rendered: list[Path] = []

    def render(folder: ScenarioFiles) -> ScenarioFiles:
        rendered.append(folder.directory)
        return folder

    async def put(folder: ScenarioFiles) -> Path:
        # a folder, or a function that renders it once the child can take it
        odd = int(folder.directory.name[1:]) % 2
        directory = await writer.put(functools.partial(render, folder) if odd else folder)
        # what the scenario's test reports next is already there, record last
        assert (directory / "metrics.json").exists()
        return directory

    try:
        written = await asyncio.gather(*(put(folder) for folder in folders))
    finally:
        await writer.aclose()
    assert written == [folder.directory for folder in folders]
    assert sorted(rendered) == sorted(f.directory for f in folders[1::2])  # each once
    for i in range(60):
        assert (tmp_path / f"s{i}" / "transcript.json").read_text() == f'{{"m": "{i}"}}\n'
        assert (tmp_path / f"s{i}" / "metrics.json").exists()


@pytest.mark.asyncio
async def test_a_folder_put_is_written_even_when_its_caller_is_cancelled(tmp_path: Path) -> None:
    """A session stopping (Ctrl-C, -x) cancels the scenarios still running, also those that
    finished and wait for the writer: such a folder was never written, so a finished scenario
    had no record and what it had spent was counted nowhere."""
    writer = await FolderWriter.start()
    count = folder_writer._IN_FLIGHT + 3  # more than the writer takes at once: some wait
    try:
        puts = [
            asyncio.ensure_future(writer.put(_folder(tmp_path / f"s{i}"))) for i in range(count)
        ]
        await asyncio.sleep(0)  # each has started: the first hold the writer, the others wait
        for put in puts:
            put.cancel()
        ended = await asyncio.gather(*puts, return_exceptions=True)
    finally:
        await writer.aclose()
    assert all(isinstance(end, asyncio.CancelledError) for end in ended), ended
    written = sorted(path.parent.name for path in tmp_path.glob("*/metrics.json"))
    assert written == sorted(f"s{i}" for i in range(count))


@pytest.mark.asyncio
async def test_a_killed_child_loses_no_folder_and_is_said_once(tmp_path: Path) -> None:
    notices: list[str] = []
    writer = await FolderWriter.start(on_fallback=notices.append)
    try:
        await writer.put(_folder(tmp_path / "before"))
        process = writer._process
        assert process is not None
        process.kill()
        await process.wait()
        written = await asyncio.gather(
            *(writer.put(_folder(tmp_path / f"after{i}")) for i in range(5))
        )
    finally:
        await writer.aclose()
    assert not writer.in_child
    assert written == [tmp_path / f"after{i}" for i in range(5)]
    for name in ["before", *(f"after{i}" for i in range(5))]:
        assert (tmp_path / name / "metrics.json").read_bytes() == b'{"done": true}\n'
    assert len(notices) == 1
    assert "written in the process that runs them" in notices[0]


@pytest.mark.asyncio
async def test_a_child_that_cannot_start_means_writing_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    notices: list[str] = []
    writer = await FolderWriter.start(on_fallback=notices.append)
    assert not writer.in_child
    await writer.put(_folder(tmp_path / "s1"))
    await writer.aclose()
    assert (tmp_path / "s1" / "metrics.json").exists()
    assert len(notices) == 1
    assert "cannot start" in notices[0]


@pytest.mark.asyncio
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
async def test_ctrl_c_or_sigterm_does_not_stop_the_child(tmp_path: Path, signum: int) -> None:
    """Either reaches every process of the group; the run decides what stops (SIGTERM killed
    the child, and the run wrote the last folders itself)."""
    writer = await FolderWriter.start()
    try:
        await writer.put(_folder(tmp_path / "s1"))  # the child is up, its handler set
        process = writer._process
        assert process is not None
        process.send_signal(signum)
        await writer.put(_folder(tmp_path / "s2"))
        assert writer.in_child
        assert process.returncode is None
    finally:
        await writer.aclose()
    assert (tmp_path / "s2" / "metrics.json").exists()


def test_a_child_whose_run_died_writes_the_folders_it_received_then_ends(tmp_path: Path) -> None:
    # as after a SIGKILL of the run: the requests are in the pipe, the input then closes
    child = subprocess.Popen(
        [sys.executable, "-c", folder_writer._CHILD, folder_writer._PACKAGE_ROOT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert child.stdin is not None
    for i in range(3):
        folder = _folder(tmp_path / f"s{i}")
        data = pickle.dumps((i, str(folder.directory), folder.files, folder.stale))
        child.stdin.write(folder_writer._HEADER.pack(len(data)) + data)
    child.stdin.write(folder_writer._HEADER.pack(1000) + b"half a request")
    child.stdin.close()
    assert child.wait(timeout=60) == 0
    for i in range(3):
        assert (tmp_path / f"s{i}" / "metrics.json").exists()
    assert sorted(os.listdir(tmp_path)) == ["s0", "s1", "s2"]
    assert child.stdout is not None
    child.stdout.close()
