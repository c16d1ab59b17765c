"""The API's wire format, as pydantic models.

One definition serves three purposes: requests are validated by these
models, responses are built from them, and the OpenAPI document takes its
schemas from them, so the document cannot drift from what the server does.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..core.ledger import PRIORITY_MAX, PRIORITY_MIN

__all__ = [
    "ErrorInfo",
    "FieldProblem",
    "PolicyInfo",
    "Problem",
    "Run",
    "RunPage",
    "StartRun",
    "Step",
]


class ErrorInfo(BaseModel):
    """A recorded error: its type's name and its message."""

    type: str
    message: str


class Run(BaseModel):
    """A run: where it stands, and its result or error once finished."""

    id: str
    policy: str
    status: str = Field(description="pending, running, suspended, succeeded, failed or cancelled")
    inputs: Any = Field(description="the run's inputs, by parameter name")
    result: Any = Field(None, description="the policy's return value (status succeeded)")
    error: ErrorInfo | None = Field(None, description="why it failed or was cancelled")
    waiting_for: str | None = Field(
        None, description="while suspended: the signal it waits for, if any"
    )
    wake_at: float | None = Field(None, description="while suspended: when a timer wakes it")
    cancel_requested: bool = False
    queue: str = "default"
    priority: int = 0
    parent_id: str | None = None
    created_at: float = Field(description="seconds since the epoch")
    updated_at: float


class RunPage(BaseModel):
    """A page of runs, newest first."""

    runs: list[Run]
    next: str | None = Field(
        None, description="pass as ?cursor= for the next page; null on the last page"
    )


class Step(BaseModel):
    """A recorded step of a run (a ``step`` event of its stream)."""

    key: str = Field(description="the step's place in the run: 1, 1.2, 2#1 ...")
    name: str
    kind: str = Field(description="call (a policy), or the runtime's own: sleep, signal, ask, ...")
    arguments: Any = None
    output: Any = None
    error: ErrorInfo | None = None
    attempts: int = 1
    started_at: float
    finished_at: float


class StartRun(BaseModel):
    """The body of a start: the policy's inputs, and how to run it."""

    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any] = Field(
        default_factory=dict, description="the policy's arguments, by name"
    )
    run_id: str | None = Field(
        None,
        description="an idempotency key: starting an id that exists returns that run "
        "(200) when the inputs are the same, and is refused (409) when they differ",
    )
    queue: str = Field("default", min_length=1, max_length=200)
    # Bounded as the stores keep it (PostgreSQL's INTEGER); a number past
    # that is the request's fault (422), not a store that is down (503).
    priority: int = Field(
        0, ge=PRIORITY_MIN, le=PRIORITY_MAX, description="higher runs are claimed first"
    )
    # ``1e400`` parses as infinity: a wake time no response could show.
    delay: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="seconds before the run may start"
    )


class FieldProblem(BaseModel):
    """One field of a request at fault."""

    field: str = Field(description="where: inputs.question, run_id, ...")
    message: str


class Problem(BaseModel):
    """Every error response: what went wrong, and for a 422 which fields."""

    error: str
    fields: list[FieldProblem] = Field(default_factory=list)


class PolicyInfo(BaseModel):
    """A policy this API starts runs of."""

    name: str
    description: str
    inputs: dict[str, Any] = Field(description="JSON schema of its inputs")
