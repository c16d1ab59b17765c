"""An HTTP API over your policies (``stalwart serve --app myapp:policies``).

Start a run, read it, list runs, stream its events as Server-Sent Events
(resumable with ``Last-Event-ID``), send it a signal, cancel it; an OpenAPI
document generated from the policies' schemas. Bearer tokens guard every
request. The API process enqueues and workers execute, unless it is told to
execute too. ``create_app(store, policies)`` gives the ASGI application;
``serve(...)`` runs it with uvicorn. See ``docs/api.md``.
"""

from __future__ import annotations

from .app import create_app, serve
from .events import Cursor
from .models import ErrorInfo, FieldProblem, PolicyInfo, Problem, Run, RunPage, StartRun, Step

__all__ = [
    "Cursor",
    "ErrorInfo",
    "FieldProblem",
    "PolicyInfo",
    "Problem",
    "Run",
    "RunPage",
    "StartRun",
    "Step",
    "create_app",
    "serve",
]
