"""@policy: names, descriptions, JSON schemas from hints and docstrings, validation."""

from typing import Annotated, Any, Literal

import pydantic
import pytest

import stalwart as sw

from ._support import Weather


@sw.policy
async def google(query: str, max_results: int = 5) -> list[dict[str, Any]]:
    """Search the web.

    Results come back ranked.

    Args:
        query: What to search for.
        max_results: How many results to return.
    """
    return []


@sw.policy
async def numpy(city: str, days: int = 3) -> str:
    """Forecast the weather.

    Parameters
    ----------
    city : str
        The city to forecast.
    days : int
        How many days ahead.
    """
    return ""


@sw.policy
async def rest(path: str, mode: Literal["r", "w"] = "r") -> str:
    """Open a file.

    :param path: Where the file is.
    :param mode: Read or write.
    """
    return ""


@pytest.mark.parametrize(
    ("pol", "summary", "docs"),
    [
        (
            google,
            "Search the web.\n\nResults come back ranked.",
            {"query": "What to search for.", "max_results": "How many results to return."},
        ),
        (
            numpy,
            "Forecast the weather.",
            {"city": "The city to forecast.", "days": "How many days ahead."},
        ),
        (rest, "Open a file.", {"path": "Where the file is.", "mode": "Read or write."}),
    ],
    ids=["google", "numpy", "rest"],
)
def test_docstring_parameter_docs_reach_the_schema(
    pol: sw.Policy[Any, Any], summary: str, docs: dict[str, str]
) -> None:
    assert pol.description == summary
    props = pol.parameters["properties"]
    assert {name: p["description"] for name, p in props.items()} == docs
    spec = pol.spec
    assert spec == sw.ToolSpec(pol.name, summary, pol.parameters)


def test_schema_types_defaults_and_required() -> None:
    schema = google.parameters
    assert schema["type"] == "object"
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["max_results"]["type"] == "integer"
    assert schema["properties"]["max_results"]["default"] == 5
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert "title" not in schema
    assert rest.parameters["properties"]["mode"]["enum"] == ["r", "w"]


def test_name_defaults_to_the_function_name() -> None:
    assert (google.name, numpy.name, rest.name) == ("google", "numpy", "rest")
    assert google.__name__ == "google"  # type: ignore[attr-defined]
    assert google.__doc__ is not None and google.__doc__.startswith("Search the web.")


def test_name_and_description_can_be_given() -> None:
    @sw.policy(name="lookup", description="Look a word up.")
    async def f(word: str) -> str:
        """Ignored summary.

        Args:
            word: The word.
        """
        return word

    assert f.name == "lookup"
    assert f.description == "Look a word up."
    assert f.parameters["properties"]["word"]["description"] == "The word."  # still parsed
    assert f.spec.name == "lookup"


def test_no_docstring_gives_an_empty_description() -> None:
    @sw.policy
    async def bare(x: int) -> int:
        return x

    assert bare.description == ""
    assert "description" not in bare.parameters["properties"]["x"]


def test_the_context_parameter_never_appears_in_the_schema() -> None:
    @sw.policy
    async def with_ctx(ctx: sw.Context, question: str) -> str:
        return question

    assert list(with_ctx.parameters["properties"]) == ["question"]
    assert with_ctx.takes_ctx
    assert with_ctx.validate({"question": "q"}) == {"question": "q"}


def test_a_first_parameter_that_is_not_a_context_is_an_argument() -> None:
    @sw.policy
    async def plain(context: str) -> str:
        return context

    assert not plain.takes_ctx
    assert list(plain.parameters["properties"]) == ["context"]


def test_no_parameters_gives_an_empty_object_schema() -> None:
    @sw.policy
    async def ping() -> str:
        return "pong"

    assert ping.parameters["properties"] == {}
    assert ping.validate({}) == {}


def test_structured_and_annotated_parameters() -> None:
    @sw.policy
    async def report(
        weather: Weather,
        count: Annotated[int, pydantic.Field(ge=1, le=10)] = 1,
        tags: list[str] | None = None,
    ) -> str:
        return ""

    schema = report.parameters
    assert schema["properties"]["count"]["minimum"] == 1
    assert schema["properties"]["count"]["maximum"] == 10
    args = report.validate({"weather": {"city": "Oslo", "celsius": "3.5"}, "count": "2"})
    assert args == {"weather": Weather(city="Oslo", celsius=3.5), "count": 2, "tags": None}
    with pytest.raises(sw.ArgumentError, match="count"):
        report.validate({"weather": {"city": "x", "celsius": 1}, "count": 11})


# -- validation -----------------------------------------------------------------
def test_validation_coerces_to_the_declared_types() -> None:
    assert google.validate({"query": "py", "max_results": "7"}) == {
        "query": "py",
        "max_results": 7,
    }
    assert google.validate({"query": "py"}) == {"query": "py", "max_results": 5}


def test_missing_argument_is_named() -> None:
    with pytest.raises(sw.ArgumentError) as info:
        google.validate({"max_results": 3})
    assert "invalid arguments for 'google'" in str(info.value)
    assert "query: Field required" in str(info.value)


def test_wrong_argument_is_named_with_what_was_given() -> None:
    with pytest.raises(sw.ArgumentError) as info:
        google.validate({"query": "py", "max_results": "many"})
    msg = str(info.value)
    assert "max_results" in msg and "'many'" in msg
    assert "query" not in msg.split(":", 1)[1]  # only the field at fault


def test_unexpected_argument_is_named() -> None:
    with pytest.raises(sw.ArgumentError, match="verbose: unexpected argument"):
        google.validate({"query": "py", "verbose": True})


def test_every_fault_is_listed_at_once() -> None:
    with pytest.raises(sw.ArgumentError) as info:
        google.validate({"max_results": "x", "extra": 1})
    msg = str(info.value)
    assert "query" in msg and "max_results" in msg and "extra" in msg


def test_argument_error_is_a_value_error() -> None:
    assert issubclass(sw.ArgumentError, ValueError)


# -- settings -----------------------------------------------------------------
def test_settings_are_kept_and_checked() -> None:
    @sw.policy(retries=2, backoff=0.1, retry_on=(KeyError,), timeout=3, record=False)
    async def f() -> None:
        return None

    assert (f.retries, f.backoff, f.retry_on, f.timeout, f.record) == (
        2,
        0.1,
        (KeyError,),
        3,
        False,
    )
    with pytest.raises(ValueError, match="retries"):
        sw.policy(retries=-1)(f.fn)
    with pytest.raises(ValueError, match="timeout"):
        sw.policy(timeout=0)(f.fn)


def test_with_settings_copies_with_changes() -> None:
    g = google.with_settings(timeout=2.0, name="search")
    assert (g.name, g.timeout, g.description) == ("search", 2.0, google.description)
    assert (google.name, google.timeout) == ("google", None)
    assert g.parameters == google.parameters


# -- class policies -----------------------------------------------------------
class WebAgent:
    """Answer from the web.

    Args:
        question: The question.
    """

    async def __call__(self, ctx: sw.Context, question: str) -> str:
        return question


class Named:
    name = "custom_name"

    async def __call__(self, x: int) -> int:
        return x


def test_class_policy_gets_a_snake_case_name_and_a_schema_without_ctx() -> None:
    pol = sw.policy(WebAgent())
    assert pol.name == "web_agent"
    assert pol.takes_ctx and pol.is_async
    assert list(pol.parameters["properties"]) == ["question"]
    assert pol.parameters["required"] == ["question"]


def test_class_policy_name_attribute_wins() -> None:
    assert sw.policy(Named()).name == "custom_name"
    assert sw.policy(name="other")(Named()).name == "other"


# -- calling outside any run ------------------------------------------------------
async def test_a_policy_awaited_outside_a_run_simply_runs() -> None:
    @sw.policy
    async def add(a: int, b: int) -> int:
        return a + b

    assert await add(2, 3) == 5
    assert await add(a=1, b=1) == 2


async def test_a_sync_policy_awaited_outside_a_run_runs_in_a_thread() -> None:
    import threading

    main = threading.get_ident()

    @sw.policy
    def where() -> int:
        return threading.get_ident()

    assert await where() != main


async def test_outside_a_run_arguments_are_not_coerced() -> None:
    # Coercion is for a model's arguments in options dispatch; Python callers
    # get plain calls.
    @sw.policy
    async def echo(n: int) -> Any:
        return n

    assert await echo("7") == "7"  # type: ignore[arg-type]
