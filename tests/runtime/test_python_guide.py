"""docs/python.md runs as written: every ```python block, in order, in one fresh interpreter, from a
folder that holds the project's scenarios; it leaves a figure drawn from a run's per-round history."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT

GUIDE = ROOT / "docs" / "python.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


def test_the_guide_has_the_sections_it_promises():
    text = GUIDE.read_text(encoding="utf-8")
    for heading in (
        "## Run the quickstart",
        "## MMD² round by round, private and non-private",
        "## Sweep the privacy budget",
        "## Compare two protocols",
        "## Errors are exceptions",
    ):
        assert heading in text
    assert len(blocks()) >= 6


def test_every_block_of_the_python_guide_runs_and_draws_the_history(tmp_path):
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    program = "\n\n".join(f"# --- block {i}\n{block}" for i, block in enumerate(blocks()))
    (tmp_path / "guide.py").write_text(program, encoding="utf-8")
    result = subprocess.run([sys.executable, "guide.py"], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figure = tmp_path / "mmd2-by-round.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 10_000
    assert "did you mean summarize.rounds?" in result.stdout
    assert (tmp_path / "quickstart-report.json").is_file()
    assert any((tmp_path / "runs").glob("quickstart-private-sweep-*/sweep.png"))
    assert "rounds; MMD² after the last:" in result.stdout  # a sweep run's report and history, read back
