"""The error tree of the suite, in one place.

    Tau2Error                    anything this suite raises on purpose
    ├── DataError                upstream data missing, corrupt or inconsistent (names file and fix)
    │   ├── DigestMismatch       a file's sha256 differs from the pinned manifest
    │   ├── GoldMismatch         a gold replay differs from the pinned gold digest (a harness error)
    │   └── UpstreamSourceError  a pinned upstream source lacks a construct the tau2 profile reads
    ├── ConfigError              a bad setting (the pytest plugin turns it into pytest.UsageError)
    ├── EndpointError            a model endpoint failed after the client's retries (infra_error)
    │   ├── ContextWindowExceeded  the endpoint refused the prompt as too long (a model-side ending)
    │   ├── UnparsedModelOutput  the server could not parse the model's output (a model-side ending)
    │   ├── EndpointDown         the endpoint's circuit breaker is open: failed at once, not tried
    │   ├── CacheMiss            replay from the response cache found no reply (nothing was sent)
    │   └── AgentInfraError      raised by an agent's own code: its backend is down (public)
    ├── ExportRefused            a run cannot become upstream's results.json as asked (a reason a
    │                            line: its profile, missing scenarios, a conversation upstream
    │                            cannot hold); the export command exits 4, nothing is written
    ├── ArtifactError            a run directory or artifact cannot be written or read
    │   ├── ArtifactFormatError  a run file of another format version (or of none)
    │   ├── ReportError          the HTML report cannot be built or written (names the file)
    │   ├── SavedConversationError  a saved transcript cannot be re-judged (the scenario runs again)
    │   └── RunInUse             another live process holds the run folder's lock
    ├── Tau2InfraError           raised by a scenario's test when an endpoint failed: a pytest
    │                            error (not a failure), excluded from the rates, resumable
    └── BudgetExhausted          --tau2-max-cost: a request would pass the budget and was not
                                 sent; its scenario is not run (budget), never scored, resumable

Outside it, because it must not be caught as an ``Exception``:

    KeyboardInterrupt
    └── AgentInterrupted         an agent's own code raised KeyboardInterrupt: the run is
                                 interrupted as by Ctrl-C (summaries written, resume offered)

Tool failures are not exceptions of this tree: the dispatcher in ``tools`` turns them into
``Error: ...`` results for the model (see ``tools.tool_error.ToolError``). Our own bugs are never
caught and turned into text: they raise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AgentInfraError",
    "AgentInterrupted",
    "ArtifactError",
    "ArtifactFormatError",
    "BudgetExhausted",
    "CacheMiss",
    "ConfigError",
    "ContextWindowExceeded",
    "DataError",
    "DigestMismatch",
    "EndpointDown",
    "EndpointError",
    "ExportRefused",
    "GoldMismatch",
    "ReportError",
    "RunInUse",
    "SavedConversationError",
    "Tau2Error",
    "Tau2InfraError",
    "UnparsedModelOutput",
    "UpstreamSourceError",
]


class Tau2Error(Exception):
    """Base of every error this suite raises on purpose."""


class DataError(Tau2Error):
    """Upstream data is missing, corrupt or inconsistent. The message names the file and the fix."""


class DigestMismatch(DataError):
    """A data file's sha256 differs from the one pinned in the manifest."""

    def __init__(self, *, path: str, expected: str, actual: str, fix: str) -> None:
        self.path = path
        self.expected = expected
        self.actual = actual
        super().__init__(f"{path}: sha256 mismatch (expected {expected}, got {actual}). {fix}")


class GoldMismatch(DataError):
    """A task's gold replay differs from the digest pinned with this release.

    The data files passed their sha256 check, so the installed tools (or a changed replay) no
    longer reproduce the expected state: a harness error, never the agent's failure.
    """


class UpstreamSourceError(DataError):
    """A pinned upstream source file no longer has the construct the tau2 profile derives from.

    The file passed its sha256 check against the manifest, so the manifest itself points at a
    changed pin: the message names the file and the construct that was not found.
    """

    def __init__(self, *, source: str, construct: str) -> None:
        self.source = source
        self.construct = construct
        super().__init__(
            f"{source}: {construct} not found; the tau2 profile derives upstream's text from "
            "this construct. The manifest pins a source this release cannot read: restore "
            "fixtures/manifest.json from git (and re-run `python -m tau2_retail data fetch`)."
        )


class ConfigError(Tau2Error):
    """A setting has a value that cannot work; the message names it and what is accepted."""


class EndpointError(Tau2Error):
    """A model endpoint failed after retries: an infrastructure error, not the model's fault.

    ``body`` is a short excerpt of the last error body, ``full_body`` the whole of it (kept in
    the scenario's artifacts); ``attempts`` and ``wait_seconds`` say what the request cost;
    ``timeout_seconds`` is set when its last attempt timed out.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: str = "",
        full_body: str = "",
        attempts: int = 0,
        wait_seconds: float = 0.0,
        timeout_seconds: float | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.full_body = full_body or body
        self.attempts = attempts
        self.wait_seconds = wait_seconds
        #: set when the request failed because its last attempt got no complete reply
        #: within this many seconds (the role's request timeout)
        self.timeout_seconds = timeout_seconds
        super().__init__(message)


class ContextWindowExceeded(EndpointError):
    """The endpoint rejected the request because the prompt exceeds the model's context."""


class UnparsedModelOutput(EndpointError):
    """The server answered that the model's output could not be parsed (``server`` names its
    known form, ``tau2_retail.models.unparsed``): the model's malformed output, scored as the
    agent's failure (``agent_error``) when the agent wrote it; for the simulated user and the
    judge it stays an infra error of that role (their models are not what is measured)."""

    def __init__(self, message: str, *, server: str, **kwargs: Any) -> None:
        self.server = server
        super().__init__(message, **kwargs)


class EndpointDown(EndpointError):
    """The endpoint's circuit breaker is open: the request failed at once without being sent."""


class CacheMiss(EndpointError):
    """Replay mode of the response cache has no reply for a request (``digest`` names it).

    An infra error like an outage: the scenario is excluded from the rates and resumable.
    """

    def __init__(self, message: str, *, digest: str) -> None:
        self.digest = digest
        super().__init__(message)


class AgentInfraError(EndpointError):
    """Raise it from your agent's code when the agent's own backend is down or unreachable.

    The scenario then ends as an infra error of the agent role, as for an endpoint outage: it
    is excluded from the rates, counted by the gate and run again by ``--tau2-resume``. Any
    other exception an agent raises is the agent's failure (``agent_error``).
    """


class ExportRefused(Tau2Error):
    """A run cannot be exported to upstream's ``results.json`` as asked; ``reasons`` holds one
    line per reason (each says what is wrong and the way out); ``partial`` says whether
    exporting what is there (``--allow-incomplete``) would succeed. Nothing was written."""

    def __init__(self, reasons: Sequence[str], *, partial: bool = False) -> None:
        self.reasons = tuple(reasons)
        self.partial = partial
        super().__init__("\n".join(self.reasons))


class AgentInterrupted(KeyboardInterrupt):
    """An agent's own code raised ``KeyboardInterrupt`` (in its thread, where no real Ctrl-C
    can land): the run is interrupted as Ctrl-C interrupts it. Its scenario has no record,
    so ``--tau2-resume`` runs it again. Uncaught, it behaves as the ``KeyboardInterrupt`` it is.
    """


class ArtifactError(Tau2Error):
    """A run directory or artifact cannot be written or read."""


class ArtifactFormatError(ArtifactError):
    """A run file states another format version than this version reads (or none: a
    pre-release version wrote it). The message names the file, the version found and the one
    read."""


class ReportError(ArtifactError):
    """The report cannot be built or written: a run file is missing or malformed, or the output
    cannot be written. The message names the file."""


class SavedConversationError(ArtifactError):
    """A saved transcript cannot be re-judged (unreadable, or its actions do not replay to the
    recorded database): the caller runs the scenario again instead."""


class Tau2InfraError(Tau2Error):
    """A scenario's endpoint (agent, user or judge) failed after retries: its test is a pytest
    error, not a failure; the scenario is excluded from the rates and re-run by resume."""


class RunInUse(ArtifactError):
    """Another live process holds the run folder's lock (a second run with the same id, or a
    resume of a run that is still going). ``holder`` says who (``pid 1234 on host ci-7 ...``),
    as its lock file names it."""

    def __init__(self, message: str, *, holder: str) -> None:
        self.holder = holder
        super().__init__(message)


class BudgetExhausted(Tau2Error):
    """A model request was not sent: with what the run spent and what its requests in flight
    reserved, its estimated cost would pass ``--tau2-max-cost``. The scenario stops unscored
    (not a failure, not an infra error: "not run (budget)") and a resume runs it again.

    ``spent``: what the stopped scenario's requests had cost (USD) when it stopped, set by the
    harness that ran it (0 for a scenario the budget kept from starting); an agent given as
    code counts what it spent through its own backend."""

    spent: float = 0.0
