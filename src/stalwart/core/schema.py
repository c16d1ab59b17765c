"""JSON schemas and argument validation built from a function's signature.

A policy's type hints are its contract with a model: the schema a model sees
and the validation its arguments go through are built from the same pydantic
model, so they cannot disagree. pydantic is imported on first use only, which
keeps ``import stalwart`` light for programs that never offer options.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

from .errors import ArgumentError

__all__ = ["BOUND", "Signature"]

#: The attribute where a tool with arguments fixed by the program
#: (``functools.partial(tool, account_id=7)``, see :mod:`.callables`) keeps
#: their names: they are not in its schema, and a model may not give them.
BOUND = "__stalwart_bound__"


class Signature:
    """The parameters a policy takes, minus the injected context.

    Everything here is computed on first use: decorating a function costs a
    signature inspection, not a docstring parse or a pydantic model.
    """

    __slots__ = ("_description", "_docs", "_fn", "_model", "bound", "fn_name", "params")

    def __init__(
        self, fn: Callable[..., Any], skip_first: bool, fn_name: str, description: str | None
    ) -> None:
        params = list(inspect.signature(fn).parameters.values())
        if skip_first:
            params = params[1:]
        self.params = [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        self.fn_name = fn_name
        self.bound: frozenset[str] = getattr(fn, BOUND, frozenset())
        self._fn = fn
        self._description = description
        self._docs: dict[str, str] | None = None
        self._model: type[BaseModel] | None = None

    def _parse(self) -> None:
        summary, self._docs = _parse_doc(inspect.getdoc(self._fn) or "")
        if self._description is None:
            self._description = summary

    @property
    def description(self) -> str:
        if self._docs is None:
            self._parse()
        return self._description or ""

    @property
    def docs(self) -> dict[str, str]:
        if self._docs is None:
            self._parse()
        assert self._docs is not None
        return self._docs

    @property
    def model(self) -> type[BaseModel]:
        if self._model is None:
            self._model = self._build()
        return self._model

    def _build(self) -> type[BaseModel]:
        from typing import Annotated, get_type_hints

        from pydantic import BeforeValidator, ConfigDict, Field, create_model

        from .numbers import refuse_bool_numbers

        try:
            hints = get_type_hints(self._fn, include_extras=True)
        except Exception:  # unresolvable forward refs: fall back to raw annotations
            hints = {}
        docs = self.docs
        fields: dict[str, Any] = {}
        for p in self.params:
            ann = hints.get(p.name, p.annotation)
            if ann is inspect.Parameter.empty:
                ann = Any
            default = ... if p.default is inspect.Parameter.empty else p.default
            # Lax, so "6" is 6 for an int; but a boolean is not a number (numbers.py).
            checked = Annotated[ann, BeforeValidator(refuse_bool_numbers(ann))]  # type: ignore[valid-type]
            fields[p.name] = (checked, Field(default, description=docs.get(p.name)))
        return create_model(
            _model_name(self.fn_name),
            __config__=ConfigDict(arbitrary_types_allowed=True, extra="forbid"),
            **fields,
        )

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema a model sees for this policy's arguments."""
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate and coerce ``arguments``; raise :class:`ArgumentError`."""
        from pydantic import ValidationError

        if self.bound:
            fixed = sorted(k for k in arguments if k in self.bound)
            if fixed:  # said plainly, not as an "unexpected argument"
                raise ArgumentError(
                    f"invalid arguments for {self.fn_name!r}: "
                    + "; ".join(f"{k}: set by the program; a model may not give it" for k in fixed)
                )
        try:
            obj = self.model.model_validate(arguments)
        except ValidationError as exc:
            raise ArgumentError(_describe(self.fn_name, exc)) from None
        return {name: getattr(obj, name) for name in type(obj).model_fields}


def _model_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.replace("-", "_").split("_")) + "Args"


def _describe(name: str, exc: Any) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(x) for x in err["loc"]) or "(arguments)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unexpected argument"
        elif "input" in err and err["type"] != "missing":
            msg = f"{msg} (got {err['input']!r})"
        problems.append(f"{where}: {msg}")
    return f"invalid arguments for {name!r}: " + "; ".join(problems)


def _parse_doc(doc: str) -> tuple[str, dict[str, str]]:
    """The summary and per-parameter docs, in Google, NumPy or reST style."""
    if not doc:
        return "", {}
    import docstring_parser

    parsed = docstring_parser.parse(doc)
    parts = [parsed.short_description or "", parsed.long_description or ""]
    summary = "\n\n".join(p for p in parts if p).strip()
    docs = {p.arg_name: (p.description or "").strip() for p in parsed.params}
    return summary, {k: v for k, v in docs.items() if v}
