"""The API's wire format, as pydantic models.

One definition serves three purposes: requests are validated by these
models, responses are built from them, and the OpenAPI document takes its
schemas from them, so the document cannot drift from what the server does.
"""

from __future__ import annotations

import functools
import sys
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from ..core.ledger import CHILD_MARK, MAX_DELAY, MAX_RUN_ID, PRIORITY_MAX, PRIORITY_MIN
from ..core.tags import MAX_TAG_KEY, MAX_TAG_VALUE, MAX_TAGS

__all__ = [
    "ErrorInfo",
    "FieldProblem",
    "PolicyInfo",
    "Problem",
    "Run",
    "RunPage",
    "StartRun",
    "Step",
    "StepPage",
    "json_type_problems",
    "printable_pattern",
    "run_id_schema",
    "tag_filter_schema",
    "tags_schema",
]


def _a_number(value: Any) -> Any:
    """JSON ``true`` and ``"7"`` are not numbers: refused where the document says integer."""
    if isinstance(value, bool | str):
        raise ValueError(f"an integer, not {type(value).__name__}")
    return value


# Lax int accepts 7.0 (an integer in JSON Schema), and "7" and true (not).
_Priority = Annotated[int, BeforeValidator(_a_number)]

_SYNTAX = frozenset("\\]-^[")


def _char(code: int) -> str:
    c = chr(code)
    return f"\\{c}" if c in _SYNTAX else c


@functools.cache
def printable_pattern(exclude: str = "") -> str:
    """A regex character class of every character Python calls printable
    (:meth:`str.isprintable`), less ``exclude``: the document's words for
    the rule the server applies, built from the same rule, so the two agree
    on every character. Characters are written as themselves (no escape
    form means an astral character in both Python and ECMA regexes)."""
    parts: list[str] = []
    start: int | None = None
    for code in range(sys.maxunicode + 2):
        ok = code <= sys.maxunicode and chr(code).isprintable() and chr(code) not in exclude
        if ok and start is None:
            start = code
        elif not ok and start is not None:
            end = code - 1
            if end == start:
                parts.append(_char(start))
            else:
                parts.append(f"{_char(start)}-{_char(end)}")
            start = None
    return "[" + "".join(parts) + "]"


def run_id_schema() -> dict[str, Any]:
    """A run id a user may choose (:func:`~stalwart.core.ledger.check_run_id`):
    1 to MAX_RUN_ID printable characters, not ``~``, not only spaces."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_RUN_ID,
        "pattern": f"^ *{printable_pattern(CHILD_MARK + ' ')}{printable_pattern(CHILD_MARK)}*$",
        "description": f"1 to {MAX_RUN_ID} printable characters, not {CHILD_MARK!r}, "
        "not only spaces",
    }


_TAG_KEY = f"[A-Za-z0-9_.\\-]{{1,{MAX_TAG_KEY}}}"


def tags_schema() -> dict[str, Any]:
    """A run's tags (:func:`~stalwart.core.tags.check_tags`): at most
    MAX_TAGS keys of 1 to 64 letters, digits, ``_ . -``, each a value of 1 to
    MAX_TAG_VALUE printable characters."""
    return {
        "type": "object",
        "maxProperties": MAX_TAGS,
        "propertyNames": {"type": "string", "pattern": f"^{_TAG_KEY}$"},
        "additionalProperties": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_TAG_VALUE,
            "pattern": f"^{printable_pattern()}*$",
        },
        "description": f"at most {MAX_TAGS} tags: keys of 1 to {MAX_TAG_KEY} letters, "
        f"digits, '_', '.' or '-'; values of 1 to {MAX_TAG_VALUE} printable characters",
    }


def tag_filter_schema() -> dict[str, Any]:
    """``?tag=key:value`` (repeatable), as ``GET /runs`` takes it."""
    return {
        "type": "array",
        "maxItems": MAX_TAGS,
        "items": {
            "type": "string",
            "pattern": f"^{_TAG_KEY}:{printable_pattern()}{{1,{MAX_TAG_VALUE}}}$",
        },
    }


_JSON_NAMES = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
    type(None): "null",
}


def _fits(value: Any, kind: str) -> bool:
    """Whether a JSON value is of the JSON Schema ``type`` ``kind``."""
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "integer":
        if isinstance(value, float):
            return value.is_integer()  # 2.0 is an integer in JSON Schema
        return isinstance(value, int) and not isinstance(value, bool)
    return _JSON_NAMES.get(type(value)) == kind


def json_type_problems(
    value: Any, schema: Any, root: dict[str, Any], where: str = "", depth: int = 0
) -> list[tuple[str, str]]:
    """Where ``value`` (parsed JSON) is not of the JSON type its schema
    names, as ``(field, message)``: the ``type`` keywords only, through
    ``$ref`` (to ``root``'s ``$defs``), ``anyOf``/``oneOf``/``allOf``,
    properties, items. Pydantic's lax mode reads ``"2"`` and ``true`` as the
    int 2 and 1, and ``"yes"`` as True: values the document refuses, so the
    API refuses them before pydantic sees them."""
    if depth > 100 or not isinstance(schema, dict):
        return []
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = root.get("$defs", {}).get(ref.rsplit("/", 1)[1])
        return json_type_problems(value, target, root, where, depth + 1)
    for word in ("anyOf", "oneOf"):
        branches = schema.get(word)
        if isinstance(branches, list) and branches:
            found = [json_type_problems(value, b, root, where, depth + 1) for b in branches]
            if all(found):
                return min(found, key=len)
    for branch in schema.get("allOf", []) if isinstance(schema.get("allOf"), list) else []:
        if problems := json_type_problems(value, branch, root, where, depth + 1):
            return problems
    kinds = schema.get("type")
    if isinstance(kinds, str):
        kinds = [kinds]
    if isinstance(kinds, list) and kinds and not any(_fits(value, k) for k in kinds):
        shown = _JSON_NAMES.get(type(value), type(value).__name__)
        return [(where, f"Input should be of JSON type {' or '.join(kinds)}, not {shown}")]
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        for key, item in value.items():
            sub = props.get(key, schema.get("additionalProperties"))
            out += json_type_problems(item, sub, root, _join(where, key), depth + 1)
    elif isinstance(value, list):
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items")
            out += json_type_problems(item, sub, root, _join(where, str(i)), depth + 1)
    return out


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


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
    tags: dict[str, str] = Field(default_factory=dict, description="the run's tags")
    created_at: float = Field(description="seconds since the epoch")
    updated_at: float
    code_version: str = Field(
        "", description="the code version the run is pinned to (the one it started on)"
    )
    stranded: str | None = Field(
        None, description="why no live worker can continue the run, when none can"
    )


class Version(BaseModel):
    """An application version the store's workers have run."""

    version: str
    latest: bool = Field(description="new runs go to this version's workers")
    retired: bool = Field(description="its workers take no more runs")
    retired_at: float | None = None
    first_seen: float = Field(description="seconds since the epoch")
    live_workers: list[str] = Field(description="the owners of its live workers")


class VersionList(BaseModel):
    """The application versions, in the order first seen."""

    versions: list[Version]


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
    kind: str = Field(description="call (a policy), or the engine's own: sleep, signal, ask, ...")
    arguments: Any = None
    output: Any = None
    error: ErrorInfo | None = None
    attempts: int = 1
    started_at: float
    finished_at: float


class StepPage(BaseModel):
    """A page of a run's steps, in the order they finished, oldest first,
    and where it sits among them: ``earlier`` steps come before it, ``later``
    after it, of ``step_count``."""

    steps: list[Step]
    step_count: int = Field(description="how many steps the run has recorded")
    earlier: int = Field(description="how many of them come before this page")
    later: int = Field(description="how many of them come after this page")
    next: str | None = Field(
        None,
        description="pass as ?cursor= for the steps after these; null when this page "
        "holds the run's latest step",
    )


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
    priority: _Priority = Field(
        0, ge=PRIORITY_MIN, le=PRIORITY_MAX, description="higher runs are claimed first"
    )
    # ``1e400`` parses as infinity: a wake time no response could show; a
    # delay past MAX_DELAY is a run no worker would take. Strict: ``false``
    # is not 0 seconds.
    delay: float | None = Field(
        None,
        ge=0,
        le=MAX_DELAY,
        allow_inf_nan=False,
        strict=True,
        description=f"seconds before the run may start, 0 to {MAX_DELAY} (ten years)",
    )
    tags: dict[str, str] | None = Field(
        None, description="the run's tags, to find it by (a run that exists keeps its own)"
    )


class FieldProblem(BaseModel):
    """One field of a request at fault."""

    field: str = Field(description="where: inputs.question, run_id, ...")
    message: str


class Problem(BaseModel):
    """Every error response: what went wrong, and for a 422 which fields."""

    error: str
    fields: list[FieldProblem] = Field(default_factory=list)
    code: str | None = Field(
        default=None,
        description="the stable error_code of the Stalwart error behind the response "
        "(run_not_found, input_mismatch_error, ...: docs/reference.md), when one is",
    )


class PolicyInfo(BaseModel):
    """A policy this API starts runs of."""

    name: str
    description: str
    inputs: dict[str, Any] = Field(description="JSON schema of its inputs")
