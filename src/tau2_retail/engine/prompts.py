"""The system prompts: the agent's (policy verbatim + our notes) and the user simulator's.

Both are model-visible text pinned by snapshot tests; change them only on purpose.
"""

from __future__ import annotations

from tau2_retail.data.tasks import Task

__all__ = [
    "ADDITIONAL_NOTES",
    "GREETING",
    "agent_system_prompt",
    "user_system_prompt",
]

GREETING = "Hi! How can I help you today?"

ADDITIONAL_NOTES = """\
- You are chatting with the customer in plain text: write short, clear messages without \
Markdown formatting.
- Call `end_conversation` only after the customer confirms they have nothing else to ask, or \
right after you transferred them to a human agent.
- Report only what a tool call actually did: if a tool returned an error, say so instead of \
claiming success."""


def agent_system_prompt(policy: str, *, additional_notes: bool = True) -> str:
    """The policy verbatim, then (unless turned off) our short notes."""
    if not additional_notes:
        return policy
    return f"{policy}\n\n## Additional Notes to Follow\n\n{ADDITIONAL_NOTES}"


def user_system_prompt(guidelines: str, task: Task) -> str:
    """The simulation guidelines verbatim, then the scenario of ``task``."""
    sections = [
        ("Your goal", task.reason_for_call),
        ("Your personality", task.task_instructions),
        ("Things you know", task.known_info),
        ("Things you don't know", task.unknown_info),
    ]
    scenario = "\n\n".join(
        f"## {title}\n{text.strip()}" for title, text in sections if text and text.strip()
    )
    return f"{guidelines.rstrip()}\n\n<scenario>\n{scenario}\n</scenario>"
