"""Argument values shared by the tool tests."""

from __future__ import annotations

from typing import Final

NEW_ADDRESS: Final = {
    "address1": "1 Test Road",
    "address2": "",
    "city": "Boston",
    "state": "MA",
    "country": "USA",
    "zip": "02101",
}
"""A valid address, in the tools' argument order (state before country)."""
