"""Turning runs and steps into rich renderables: values, runs, steps, times.

Everything here reads records as they are stored: JSON text, parsed with
``json.loads`` and shown as data. Nothing read from a ledger is decoded into
an application type (S13): a tagged dataclass, model or enum shows as its
type's name and its fields (``Point(x=1, y=2)``), and messages are rebuilt
from their fields by hand, never through the codec, so inspecting a ledger
imports nothing and works from anywhere. Every string that came from the
ledger passes through :func:`~stalwart.core.redact.printable` before it reaches
the terminal, and is put in ``Text`` objects, never in markup.
"""
