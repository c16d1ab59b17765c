"""What the demo's agent knows: a small corpus of Python release notes, and its words.

One document per release, enough for the two-part question to need two
searches and two reads, so that a kill in the middle leaves finished steps
before it and work after it.
"""

from __future__ import annotations

import re

__all__ = ["CORPUS", "QUESTION", "keywords", "words"]

QUESTION = (
    "Which Python release first offered a build without the GIL, "
    "and which release introduced the walrus operator?"
)

# The corpus the agent searches: one document per release.
CORPUS: dict[str, dict[str, str]] = {
    "python-3.8": {
        "title": "Python 3.8",
        "released": "2019-10-14",
        "text": (
            "Python 3.8 was released on 14 October 2019. It introduced assignment "
            "expressions, the walrus operator :=, which assigns to a variable inside an "
            "expression (PEP 572). Positional-only parameters, marked with a slash in a "
            "signature, arrived in the same release (PEP 570). F-strings gained the = "
            "specifier, which prints an expression together with its value for debugging."
        ),
    },
    "python-3.9": {
        "title": "Python 3.9",
        "released": "2020-10-05",
        "text": (
            "Python 3.9 was released on 5 October 2020. Dictionaries gained the union "
            "operators | and |= (PEP 584), and strings gained removeprefix and removesuffix "
            "(PEP 616). Standard collections such as list and dict can be used as generic "
            "types in annotations (PEP 585). CPython switched to a new PEG-based parser "
            "(PEP 617), and the zoneinfo module brought the IANA time zone database to the "
            "standard library."
        ),
    },
    "python-3.10": {
        "title": "Python 3.10",
        "released": "2021-10-04",
        "text": (
            "Python 3.10 was released on 4 October 2021. Its headline feature is structural "
            "pattern matching with the match and case statements (PEP 634). Union types can "
            "be written as X | Y (PEP 604), context managers can be grouped in parentheses, "
            "and error messages became much more precise."
        ),
    },
    "python-3.11": {
        "title": "Python 3.11",
        "released": "2022-10-24",
        "text": (
            "Python 3.11 was released on 24 October 2022. The Faster CPython project made "
            "it about 25 percent faster than 3.10 on the standard benchmark suite. Exception "
            "groups and except* let a program raise and handle several unrelated exceptions "
            "at once (PEP 654), tracebacks point at the exact expression that failed, and "
            "tomllib reads TOML files (PEP 680). asyncio gained TaskGroup."
        ),
    },
    "python-3.12": {
        "title": "Python 3.12",
        "released": "2023-10-02",
        "text": (
            "Python 3.12 was released on 2 October 2023. A new syntax declares type "
            "parameters and type aliases (PEP 695), and f-strings were given a formal "
            "grammar that lifts most of their old restrictions (PEP 701). Each "
            "subinterpreter can have its own GIL (PEP 684), a step towards parallelism, "
            "though the main interpreter keeps a global lock. The distutils package was "
            "removed."
        ),
    },
    "python-3.13": {
        "title": "Python 3.13",
        "released": "2024-10-07",
        "text": (
            "Python 3.13 was released on 7 October 2024. It was the first release to offer "
            "an experimental free-threaded build without the GIL, the global interpreter "
            "lock, so that threads can run Python code in parallel (PEP 703). It also ships "
            "an experimental JIT compiler (PEP 744) and a new interactive interpreter with "
            "multi-line editing and colour. Many legacy modules, the dead batteries, were "
            "removed (PEP 594)."
        ),
    },
}

_STOP_WORDS = (
    "a an and the of to in on for with which what who when where why how is was were "
    "did does do first python release version introduced offered"
)
_STOP = frozenset(_STOP_WORDS.split())


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9][a-z0-9.+*|:=-]*", text.lower())


def keywords(text: str) -> list[str]:
    return [w for w in words(text) if w not in _STOP]
