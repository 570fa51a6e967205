"""docs/privacy.md's tables of what each protocol releases and what each party receives are made from
the protocols' declarations (marketplace.reporting.declared), and ``marketplace protocols --privacy NAME``
prints them for any scenario."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

import marketplace
from marketplace.reporting.declared import BLOCK, declared_markdown

DOC = ROOT / "docs" / "privacy.md"


def test_the_docs_tables_are_the_declarations():
    blocks = BLOCK.findall(DOC.read_text())
    assert sorted(name for _, name, *_ in blocks) == ["pfds", "sketch", "stc", "summarize"]
    for _, name, scenario, shown, _ in blocks:
        config = marketplace.load(ROOT / scenario).config
        assert shown == declared_markdown(name, config), (
            f"docs/privacy.md's {name} tables differ from its declarations: "
            "run `python -m marketplace.reporting.declared docs/privacy.md` from the project's root"
        )


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "marketplace", "protocols", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_the_command_prints_a_protocols_releases_and_view_for_a_scenario():
    done = cli("--privacy", "stc", "--scenario", "scenarios/stc-synthetic.yaml", "--set", "stc.privacy.epsilon=0.7")
    assert done.returncode == 0, done.stderr
    assert "| owner-1 |" in done.stdout and "eps 0.7" in done.stdout
    assert "| consumer |" in done.stdout or "consumer: no finite cost" in done.stdout
    assert "| curator |" in done.stdout  # what the curator receives


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--privacy", "nope"], "--privacy: no protocol 'nope'"),
        (["--privacy", "stc", "--check", "stc"], "give --check NAME or --privacy NAME, not both"),
        (["--privacy", "stc", "--scenario", "scenarios/sketch-quickstart.yaml"], "is of protocol 'sketch', not 'stc'"),
        (
            ["--privacy", "stc", "--scenario", "scenarios/stc-synthetic.yaml", "--set", "stc.privacy.epsilon=-1"],
            "epsilon",
        ),
    ],
)
def test_the_command_refuses_what_it_cannot_show_with_exit_2(args, says):
    done = cli(*args)
    assert done.returncode == 2 and says in done.stderr, done.stderr
