"""Times and durations as a reader wants them: local dates, spans, milliseconds."""

from __future__ import annotations

import time
from datetime import datetime

__all__ = ["duration", "relative", "when"]


def when(ts: float | None) -> str:
    """Local time, to the second; dates matter for runs that wait for days."""
    if ts is None:
        return ""
    try:
        return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, ValueError, OSError):  # a wake time in the year 33715
        return f"{ts:.0f} (beyond the calendar)"


def relative(ts: float, now: float | None = None) -> str:
    delta = ts - (time.time() if now is None else now)
    span = _span(abs(delta))
    return f"in {span}" if delta >= 0 else f"{span} ago"


def _span(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m"
    if seconds < 86400:
        return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"
    return f"{seconds // 86400:.0f}d{seconds % 86400 // 3600:.0f}h"


def duration(seconds: float) -> str:
    if seconds < 0.001:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
