"""The `stalwart` command tree, walked by introspection, against its page and
its help: every command and every option is on docs/cli.md (in the command's
section, or on the page that section links to), and every option's help
names what it takes (`--store URL`), never a type like `<str>` or `<bool>`.
A command or option added without its documentation fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

import stalwart as sw
from stalwart.cli.app import app

DOCS = Path(__file__).parents[2] / "docs"
PAGE = (DOCS / "cli.md").read_text()
TYPE_SHOWN = re.compile(r"<(str|bool|int|float|path|text|integer|boolean)[^>]*>")


def _commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):  # a group (typer's own click, or click's)
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


TREE = list(_commands(typer.main.get_command(app)))


def _section(path: tuple[str, ...]) -> str:
    """The text of the page's sections whose heading names the command, with
    the pages those sections link to, and the page's opening (what every
    command takes: `--store`)."""
    name = "stalwart " + " ".join(path)
    parts = re.split(r"^(?=#{2,3} )", PAGE, flags=re.M)
    found = [p for p in parts if p.startswith("### ") and _names(p.splitlines()[0], name)]
    assert found, f"docs/cli.md has no section for `{name}`"
    text = parts[0] + "".join(found)
    for link in re.findall(r"\]\(([a-z-]+\.md)(?:#[^)]*)?\)", "".join(found)):
        text += (DOCS / link).read_text()
    return text


def _names(heading: str, name: str) -> bool:
    """Whether a heading names the command: `stalwart runs fork RUN --app
    MODULE` names `stalwart runs fork`, not `stalwart runs`; `stalwart
    schedules list|pause` names both."""
    wanted = name.split()
    for code in re.findall(r"`([^`]+)`", heading):
        words = code.split()
        if len(words) < len(wanted):
            continue
        if not all(w in words[i].split("|") for i, w in enumerate(wanted)):
            continue
        rest = words[len(wanted) :]
        if not rest or not re.fullmatch(r"[a-z][a-z|-]*", rest[0]):
            return True
    return False


def _options(command: Any) -> list[list[str]]:
    """Each option's names: `--wait/--no-wait` is documented by either."""
    return [
        [*p.opts, *p.secondary_opts]
        for p in command.params
        if p.param_type_name == "option" and not p.hidden and "--help" not in p.opts
    ]


def test_the_tree_has_the_commands_the_readme_promises() -> None:
    names = {" ".join(path) for path, _ in TREE}
    assert {"runs export", "runs import", "runs fork", "worker", "schedules list"} <= names


@pytest.mark.parametrize(("path", "command"), TREE, ids=[" ".join(p) for p, _ in TREE])
def test_every_command_and_option_is_on_the_page(path: tuple[str, ...], command: Any) -> None:
    text = _section(path)
    missing = [
        names[0]
        for names in _options(command)
        if not any(re.search(rf"`{name}[`\s=]", text) for name in names if name.startswith("--"))
    ]
    assert not missing, f"stalwart {' '.join(path)}: docs/cli.md does not show {missing}"


@pytest.mark.parametrize(("path", "command"), TREE, ids=[" ".join(p) for p, _ in TREE])
def test_help_names_what_each_option_takes(path: tuple[str, ...], command: Any) -> None:
    shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert not TYPE_SHOWN.search(shown.output), shown.output
    ctx = command.context_class(command, info_name=path[-1])
    for param in command.get_params(ctx):
        takes = param.display_type_rich(ctx)
        if param.param_type_name == "argument":
            assert not takes and param.metavar.isupper(), param.name  # RUN, JSON
        elif param.is_flag:
            assert not takes, param.opts  # a flag takes no value: shows none
        else:
            assert takes and not takes.startswith("<"), (param.opts, takes)  # URL, N


def test_version_prints_the_installed_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stalwart", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == f"stalwart {sw.__version__}\n"
    assert "`stalwart --version`" in PAGE
