"""docs/experiments.md reads as a record of what the code gives: every table names the command that
reproduces it, and the prose speaks of the code as it is, in an impersonal voice.

A reader reruns a table with the command beside it, under the code they have, so a table whose
section holds no command cannot be checked, and "today's default" or "we" ties a figure to a moment
or a person the reader cannot see. Code (fenced blocks and inline spans) is left out of the word
checks: command names such as ``ours-processes`` are identifiers, not prose.
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

DOC = ROOT / "docs" / "experiments.md"
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`]+`")  # a span may wrap onto the next line
HEADING = re.compile(r"^#{1,6} ", re.MULTILINE)
COMMAND_BLOCK = re.compile(r"^```(bash|sh|console)\b", re.MULTILINE)
INLINE_COMMAND = re.compile(r"`(marketplace|python3?|bash|PYTHONPATH=\S*) [^`\n]+`")
FIRST_PERSON = re.compile(r"(?i:\b(we|our|ours|ourselves|us|my|me)\b)|(?<![\w/.])I(?![\w/.'’])")
TIME_RELATIVE = re.compile(r"\btoday'?s?\b|\bnow\b|\bno longer\b|\bany more\b|\banymore\b", re.IGNORECASE)


def prose(text: str) -> str:
    """The page without its fenced blocks and inline code spans."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def sections(text: str) -> list[tuple[str, str]]:
    """(heading line, body) for every section of the page, split at headings outside fenced blocks."""
    blocks = [(m.start(), m.end()) for m in FENCE.finditer(text)]
    starts = [m.start() for m in HEADING.finditer(text) if not any(a <= m.start() < b for a, b in blocks)]
    bounds = [0, *starts, len(text)]
    return [(text[a:b].split("\n", 1)[0], text[a:b]) for a, b in zip(bounds, bounds[1:]) if a < b]


def test_every_table_names_its_command() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = []
    for heading, body in sections(text):
        has_table = any(line.startswith("|---") for line in FENCE.sub("", body).splitlines())
        if has_table and not (COMMAND_BLOCK.search(body) or INLINE_COMMAND.search(body)):
            missing.append(heading)
    assert not missing, f"docs/experiments.md: sections with a table but no command to reproduce it: {missing}"


@pytest.mark.parametrize(("what", "pattern"), [("first-person", FIRST_PERSON), ("time-relative", TIME_RELATIVE)])
def test_prose_is_impersonal_and_timeless(what: str, pattern: re.Pattern[str]) -> None:
    hits = []
    for line in prose(DOC.read_text(encoding="utf-8")).splitlines():
        hits += [f"{m.group(0)!r} in {line.strip()[:80]!r}" for m in pattern.finditer(line)]
    assert not hits, f"docs/experiments.md: {what} words in the prose (expected none): {hits}"
