"""docs/cli.md is held to the CLI, as sqlite-utils holds its docs to its commands.

Every command (nested groups such as `sandbox` included) has help and a section of its own,
every option and argument is documented in its command's section, nothing documented is missing
from the CLI, and the `console` examples run, in order, against one temporary warehouse and the
embedded sandbox, with the exit codes they state and the JSON keys the page lists.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from centsync.pipelines.cli.main import main
from centsync.pipelines.outputs.verdict_words import VERDICT_WORDS
from centsync.transform.contract import VERDICTS

ROOT = Path(__file__).resolve().parents[1]
CLI_DOC = ROOT / "docs" / "cli.md"
HEADING = re.compile(r"^## `(centsync(?: [a-z-]+)*)`$", re.MULTILINE)


def _commands(group: click.Group, prefix: str = "centsync") -> Iterator[tuple[str, click.Command]]:
    """Every command of the group, nested groups walked: (`centsync sandbox serve`, command)."""
    yield prefix, group
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        if isinstance(command, click.Group):
            yield from _commands(command, path)
        else:
            yield path, command


COMMANDS = dict(_commands(main))


def _sections(text: str) -> dict[str, str]:
    """The text under each `## `centsync ...`` heading, up to the next `## ` heading."""
    out: dict[str, str] = {}
    for match in HEADING.finditer(text):
        end = text.find("\n## ", match.end())
        out[match.group(1)] = text[match.end() : end if end >= 0 else len(text)]
    return out


def _subsection(text: str, heading: str) -> str:
    start = text.index(f"\n### {heading}\n")
    end = text.find("\n##", start + 1)
    return text[start : end if end >= 0 else len(text)]


DOC = CLI_DOC.read_text("utf-8")
SECTIONS = _sections(DOC)


def _documented_names(param: click.Parameter) -> list[str]:
    """How the page names a parameter: each long option (`--dry-run`), or an argument's NAME."""
    if isinstance(param, click.Argument):
        return [param.human_readable_name]
    return [o for o in [*param.opts, *param.secondary_opts] if o.startswith("--")]


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_has_help_and_a_section(path: str) -> None:
    command = COMMANDS[path]
    assert (command.help or "").strip(), f"`{path}` has no help text"
    groups_without_options = isinstance(command, click.Group) and not command.params
    assert path in SECTIONS or groups_without_options, f"docs/cli.md has no section `{path}`"


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (p, n)
        for p, c in sorted(COMMANDS.items())
        for param in c.params
        for n in _documented_names(param)
    ],
)
def test_every_option_is_documented_under_its_command(path: str, name: str) -> None:
    section = SECTIONS.get(path, "")
    assert re.search(rf"`{re.escape(name)}(?![\w-])", section), (
        f"docs/cli.md does not document `{name}` in its section `{path}`"
    )


def test_every_documented_command_and_option_exists() -> None:
    for path, section in SECTIONS.items():
        assert path in COMMANDS, f"docs/cli.md documents `{path}`, which does not exist"
        known = {n for param in COMMANDS[path].params for n in _documented_names(param)}
        # the options listed in the section: bullets that start with one or more options
        listed = set()
        for line in section.splitlines():
            if line.startswith("- `"):
                listed |= set(
                    re.findall(r"`(--[a-z-]+|[A-Z_]+)(?:[ =][^`]*)?`", line.split(":")[0])
                )
        assert listed <= known, f"`{path}` documents {sorted(listed - known)}, which it lacks"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "notebooks" / "README.md",
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", page.read_text("utf-8")):
        if target.startswith(("http://", "https://")):
            continue
        linked = (page.parent / target) if target else page
        assert linked.exists(), f"{page.name} links to {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text("utf-8"), re.MULTILINE)
            assert anchor in {_slug(h) for h in headings}, f"{page.name}: no #{anchor} in {target}"


def test_the_readme_stays_an_entry_not_a_manual() -> None:
    """What it is, the two commands, a tour and where to go next (REVIEW.md 5.6): the manual
    lives in docs/."""
    assert len((ROOT / "README.md").read_text("utf-8").splitlines()) <= 160


def test_the_verdict_words_cover_every_verdict() -> None:
    assert tuple(VERDICT_WORDS) == VERDICTS


# ---------------------------------------------------------------------------------- examples


@dataclass
class Example:
    line: str
    env: dict[str, str]
    args: list[str]
    code: int


def _examples(text: str) -> list[Example]:
    """Every `$ centsync ...` line of the page's console blocks, in order."""
    found = []
    for block in re.findall(r"^```console\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        for line in block.splitlines():
            if not line.startswith("$ "):
                continue
            command, _, comment = line[2:].partition("#")
            code = re.match(r"\s*exit (\d+)", comment)
            words = shlex.split(command)
            env = {}
            while "=" in words[0]:
                key, _, value = words.pop(0).partition("=")
                env[key] = value
            assert words[0] == "centsync", line
            found.append(Example(line, env, words[1:], int(code.group(1)) if code else 0))
    return found


EXAMPLES = _examples(DOC)


def _keys(heading: str) -> tuple[set[str], set[str]]:
    """The keys a `### heading` of "JSON objects" lists: (always there, only sometimes); a
    command's result has the envelope's too (a failure is no result)."""
    always, sometimes = set(), set()
    text = _subsection(DOC, heading)
    if heading != "A failure":
        text += "\n" + _subsection(DOC, "The envelope")
    for line in text.splitlines():
        if line.startswith("- `"):
            names = re.findall(r"`(\w+)`", line.split(":")[0])
            (sometimes if "(only " in line else always).update(names)
    return always, sometimes


def _json_heading(example: Example, printed: dict[str, Any]) -> str:
    if "error" in printed and printed.get("status") in ("failed", "interrupted"):
        return "A failure"
    return f"`{example.args[0]} --json`"


def test_the_page_has_runnable_examples() -> None:
    commands = {e.args[0] for e in EXAMPLES if e.args and not e.args[0].startswith("-")}
    assert {"refresh", "status", "reconcile", "writeback", "report", "docs"} <= commands


def _run(example: Example, workdir: Path) -> str:
    """Run one example in a child process on the shared warehouse; what it printed on stdout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CENTSYNC_") and k not in ("DAGSTER_HOME", "XDG_DATA_HOME")
    }
    env |= {
        "XDG_DATA_HOME": str(workdir / "data"),
        "DAGSTER_HOME": str(workdir / "dagster"),
        "CENTSYNC_WAREHOUSE": str(workdir / "data" / "centsync" / "centsync.duckdb"),
        **example.env,
    }
    done = subprocess.run(
        [sys.executable, "-m", "centsync.pipelines.cli", *example.args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == example.code, f"{example.line}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow  # CI runs it (make test-slow); about 25-65 s on 2 cores
@pytest.mark.e2e
def test_the_console_examples_run_and_print_the_documented_keys(tmp_path: Path) -> None:
    """In the page's order, on one warehouse (a refresh first, then the commands that read
    it), with no service configured: the embedded sandbox. One test, so that pytest-xdist
    keeps the examples together and in order."""
    for example in EXAMPLES:
        out = _run(example, tmp_path)
        if "--json" not in example.args:
            continue
        printed = json.loads(out)
        always, sometimes = _keys(_json_heading(example, printed))
        assert set(printed) <= always | sometimes, (
            f"{example.line}: docs/cli.md lacks {sorted(set(printed) - always - sometimes)}"
        )
        assert always <= set(printed), (
            f"{example.line}: docs/cli.md lists {sorted(always - set(printed))}, not printed"
        )
