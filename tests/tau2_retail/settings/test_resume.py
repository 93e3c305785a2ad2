"""A resumed run against the stored one, without pytest: the identity settings and the
players of the roles."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from tau2_retail.models.agent import AgentIdentity
from tau2_retail.plugins.process import RunPlan, run_configuration
from tau2_retail.results.records import ModelRecord, RunConfiguration
from tau2_retail.settings import (
    AgentSource,
    Inputs,
    Tau2Settings,
    adopt_stored,
    resolve_settings,
    resume_differences,
)

ENDPOINT = {"agent_model": "m", "agent_base_url": "http://127.0.0.1:1/v1"}


def resolve(options: Mapping[str, str], ini: Mapping[str, str] | None = None) -> Tau2Settings:
    return resolve_settings(
        Inputs(
            flag=lambda setting: setting.flag,
            option=lambda setting: {"user_model": "builtin:customer", **options}.get(setting.name),
            ini=lambda setting: (ini or {}).get(setting.name),
            environ={},
            load_agent=lambda spec, source: None,
        )
    )


def configuration(settings: Tau2Settings, *, effective: bool = True) -> RunConfiguration:
    return run_configuration(RunPlan(settings=settings, run_id="r"), effective=effective)


def differences(stored: RunConfiguration, settings: Tau2Settings) -> list[str]:
    return [str(d) for d in resume_differences(stored, now=configuration(settings))]


def test_the_adopted_settings_come_from_the_stored_run_unless_given() -> None:
    stored = configuration(resolve({"trials": "3", "tasks": "0,5", "profile": "tau2"}))

    settings, adopted = adopt_stored(resolve({"trials": "2"}), stored, where="run_args.json")

    assert adopted == {"tasks": ("0", "5"), "profile": "tau2"}
    assert (settings.trials, settings.tasks, settings.profile) == (2, ("0", "5"), "tau2")
    assert differences(stored, settings) == ["trials: stored 3, now 2"]


def test_a_setting_outside_the_identity_may_change() -> None:
    stored = configuration(resolve({"concurrency": "4", "min_pass_rate": "0.5"}))

    assert differences(stored, resolve({"concurrency": "1"})) == []


def test_an_endpoint_setting_differs_only_for_a_role_an_endpoint_plays() -> None:
    stored = configuration(resolve(ENDPOINT))

    assert differences(stored, resolve({**ENDPOINT, "agent_timeout": "5"})) == [
        "agent_timeout_seconds: stored 120.0, now 5.0"
    ]
    # the built-in customer has no endpoint: its endpoint settings (an ini file's; given on the
    # command line they are refused) play no part
    assert differences(stored, resolve(ENDPOINT, ini={"user_timeout": "5"})) == []


def test_every_endpoint_field_is_compared_and_the_request_values_sent() -> None:
    """Issue 27 item 5: a stored run of this version records every endpoint field as sent;
    no field is skipped as "not recorded", no value read "as configured"."""
    settings = resolve({**ENDPOINT, "profile": "tau2"})
    stored = configuration(settings)
    assert stored.agent.endpoint is not None
    assert stored.agent.endpoint["temperature"] == 0.0  # the tau2 profile's, as sent
    assert differences(stored, settings) == []
    assert differences(stored, resolve({**ENDPOINT, "profile": "tau2", "max_reply_bytes": "2048"}))
    lacking = {k: v for k, v in stored.agent.endpoint.items() if k != "max_reply_bytes"}
    partial = dataclasses.replace(stored, agent=ModelRecord(model="m", endpoint=lacking))
    assert differences(partial, settings) == [
        f"agent_max_reply_bytes: stored None, now {stored.agent.endpoint['max_reply_bytes']!r}"
    ]


def test_a_role_without_a_base_url_records_where_its_requests_went() -> None:
    """``OPENAI_BASE_URL`` (without its userinfo), else OpenAI's: a resume whose requests
    would go to another server is refused, though neither session gave a base URL."""
    settings = resolve({"agent_model": "m", "agent_api_key_env": "none"})

    def record(environ: dict[str, str]) -> RunConfiguration:
        plan = RunPlan(settings=settings, run_id="r")
        return run_configuration(plan, environ=environ)

    stored = record({"OPENAI_BASE_URL": "http://user:pw@127.0.0.1:8000/v1"})
    assert stored.agent.endpoint is not None
    assert stored.agent.endpoint["base_url"] == "http://127.0.0.1:8000/v1"
    assert (
        resume_differences(stored, now=record({"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}))
        == []
    )
    assert [str(d) for d in resume_differences(stored, now=record({}))] == [
        "agent_base_url: stored 'http://127.0.0.1:8000/v1', now 'https://api.openai.com/v1'"
    ]
    assert settings.roles.agent.endpoint is not None
    assert settings.roles.agent.endpoint.base_url is None  # the settings keep what was given


def test_an_agent_as_code_is_compared_by_its_source_name_and_version() -> None:
    stored = configuration(resolve({}))
    code = {"source": "pkg.mod:make", "kind": "import", "name": "Bot", "version": "1"}
    as_code = dataclasses.replace(
        stored, agent=ModelRecord(model="pkg.mod:make (Bot 1)", endpoint=None, code=code)
    )
    newer = dataclasses.replace(
        as_code,
        agent=ModelRecord(
            model="pkg.mod:make (Bot 2)", endpoint=None, code={**code, "version": "2"}
        ),
    )

    found = [str(d) for d in resume_differences(as_code, now=newer)]
    assert found == ["agent_code_version: stored '1', now '2'"]
    fixture = {**code, "kind": "fixture", "source": "conftest.py::tau2_agent"}
    by_fixture = dataclasses.replace(
        stored, agent=ModelRecord(model="x", endpoint=None, code=fixture)
    )
    found = [str(d) for d in resume_differences(by_fixture, now=as_code)]
    assert found == [
        "agent_code: stored 'conftest.py::tau2_agent', now 'pkg.mod:make'",
        "agent_code_name: stored None, now 'Bot'",
        "agent_code_version: stored None, now '1'",
    ]


def _code_agent(identity: AgentIdentity) -> RunConfiguration:
    settings = resolve_settings(
        Inputs(
            flag=lambda setting: setting.flag,
            option=lambda setting: {
                "user_model": "builtin:customer",
                "agent_code": "pkg.mod:Bot",
            }.get(setting.name),
            ini=lambda setting: None,
            environ={},
            load_agent=lambda spec, source: AgentSource(identity=identity, factory=object),
        )
    )
    return configuration(settings)


def test_an_agents_model_is_recorded_when_declared_and_compared_on_resume() -> None:
    plain = _code_agent(AgentIdentity(source="pkg.mod:Bot", name="Bot", version="1"))
    # no model declared: the record of before, key for key
    assert plain.agent.code == {
        "source": "pkg.mod:Bot",
        "kind": "import",
        "name": "Bot",
        "version": "1",
    }
    assert plain.agent.model == "pkg.mod:Bot (Bot 1)"
    assert plain.priced_model("agent") is None
    priced = _code_agent(AgentIdentity(source="pkg.mod:Bot", name="Bot", version="1", model="m-1"))
    assert priced.agent.code == {**plain.agent.code, "model": "m-1"}
    assert priced.agent.model == "pkg.mod:Bot (Bot 1, model m-1)"
    assert priced.priced_model("agent") == "m-1"

    other = _code_agent(AgentIdentity(source="pkg.mod:Bot", name="Bot", version="1", model="m-2"))
    found = [str(d) for d in resume_differences(priced, now=other)]
    assert found == ["agent_code_model: stored 'm-1', now 'm-2'"]
    assert [str(d) for d in resume_differences(plain, now=plain)] == []
