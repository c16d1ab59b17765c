"""How ``stalwart worker`` logs: stdlib :mod:`logging`, as text or one JSON object a line.

The library logs under the ``stalwart`` logger (runs started, claimed,
suspended, resumed, recovered, lease lost, finished; retries and slow
stores as warnings) and configures nothing: that is the application's
call. A worker is the application here, so it installs one handler on the
root logger, on stderr, in the format asked for.

In JSON a record is one object on one line, with stable field names (a log
pipeline indexes them): ``time`` (UTC, ISO 8601), ``level``, ``logger``,
``message``, then every field the record carries as ``extra`` (``run_id``,
``policy``, ...), and ``exception`` (the traceback as text) when there is
one. Credentials never reach a log line: every string passes through
:func:`~stalwart.core.redact.redact`.
"""

from __future__ import annotations

import enum
import json
import logging
from datetime import UTC, datetime
from typing import Any

from ..core.redact import printable, redact

__all__ = ["JsonFormatter", "LogFormat", "LogLevel", "configure_logging"]


class LogLevel(enum.StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class LogFormat(enum.StrEnum):
    text = "text"
    json = "json"


# What every LogRecord has; anything else on a record came as ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}


def _safe(value: Any) -> Any:
    """A field's value as JSON: scalars as they are, the rest as redacted text."""
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, bool | int | float):
        return value
    return redact(repr(value))


class JsonFormatter(logging.Formatter):
    """One JSON object a line, ASCII only, passwords masked."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC)
        line: dict[str, Any] = {
            "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and not name.startswith("_") and name not in line:
                line[name] = _safe(value)
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = redact(record.exc_text)
        return json.dumps(line, ensure_ascii=True)


class _TextFormatter(logging.Formatter):
    """The usual one-line text, passwords masked."""

    def format(self, record: logging.LogRecord) -> str:
        # A message quotes ledger data (a policy name, a holder) that an
        # adversary may have written: escape its controls, and its newlines,
        # so it can neither drive the terminal nor forge a log line.
        safe = printable(record.getMessage()).replace("\n", "\\n")
        copy = logging.makeLogRecord({**record.__dict__, "msg": safe, "args": None})
        return redact(super().format(copy))


def configure_logging(level: LogLevel, fmt: LogFormat) -> None:
    """Send every logger's records at ``level`` and above to stderr in ``fmt``."""
    handler = logging.StreamHandler()
    if fmt is LogFormat.json:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("stalwart").setLevel(level.upper())
