"""What the model tests against the loopback server share: the variable their key is read from,
the key (a secret that must never be stored, sent elsewhere or shown) and a first message."""

from __future__ import annotations

from tau2_retail.models.messages import Message, Role

KEY_ENV = "TAU2_TEST_AGENT_KEY"
SECRET = "sk-test-0123456789abcdef-secret"
HELLO = (Message(role=Role.USER, content="Hi, I want to return an order."),)
