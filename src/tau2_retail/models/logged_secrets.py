"""The keys of this process's clients, masked in the HTTP stack's log records.

With ``--log-level=DEBUG`` (or ``-o junit_logging=all``) the HTTP library the ``openai`` package
uses logs each exchange: its core library prints a reply's headers whole, so a key a server
echoes in a header reached the terminal, the log file and the junit XML. Every client's key is
registered as the client is built; a record of the ``openai``, ``httpx`` or ``httpcore`` loggers
(``httpx2``, ``httpcore2`` too, and their children) is masked before any handler sees it, and
any URL's ``user:password@`` dropped. A logger that is not enabled for a level creates no record
at all: a run without DEBUG logging pays nothing.
"""

from __future__ import annotations

import logging
from typing import Final

from tau2_retail.models.masking import Masker, could_be_secret
from tau2_retail.models.secrets import strip_userinfo

__all__ = ["mask_in_logs"]

_LOGGERS: Final = ("openai", "httpx", "httpcore")
"""Prefixes of the loggers of the HTTP stack (``httpx2`` and ``httpcore2`` start with them)."""


class _MaskedRecords(logging.Filter):
    """Masks the registered keys (and URL userinfo) in a record's message."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()
        self.masker = Masker()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = strip_userinfo(self.masker.text(message))
        if shown != message:
            record.msg, record.args = shown, ()
        return True


_FILTER: Final = _MaskedRecords()


def mask_in_logs(secret: str) -> None:
    """Mask ``secret`` (when it could be one) in the HTTP stack's log records from now on;
    the loggers that exist now (their modules are imported with the ``openai`` package) get
    the filter once."""
    if could_be_secret(secret) and secret not in _FILTER.secrets:
        _FILTER.secrets.add(secret)
        _FILTER.masker = Masker(_FILTER.secrets)
    names = [name for name in logging.root.manager.loggerDict if name.startswith(_LOGGERS)]
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
