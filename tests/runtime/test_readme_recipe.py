"""The README's by-hand recipe, run verbatim: every party from its provisioned kit, then
`marketplace assemble`, must give a completed report. When root, it runs in a network namespace of
its own, so the recipe's fixed port 5555 is free whatever else runs on this machine."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow


def recipe(heading: str) -> str:
    """The first ```bash block after ``heading`` in the README."""
    text = (ROOT / "README.md").read_text()
    match = re.search(re.escape(heading) + r".*?```bash\n(.*?)```", text, re.S)
    assert match, f"no bash block after {heading!r} in README.md"
    return match.group(1)


def test_the_readmes_by_hand_recipe_produces_a_completed_assembled_report(tmp_path):
    script = recipe("### One party at a time, by hand")
    shutil.copytree(ROOT / "scenarios", tmp_path / "scenarios")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "marketplace").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m marketplace "$@"\n')
    (tmp_path / "bin" / "marketplace").chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    runner = ["bash", "-e", "-c", script]
    namespace = f"mktreadme{os.getpid()}"
    if (
        os.geteuid() == 0
        and shutil.which("ip")
        and subprocess.run(["ip", "netns", "add", namespace], capture_output=True).returncode == 0
    ):
        subprocess.run(["ip", "-n", namespace, "link", "set", "lo", "up"], check=True)
        runner = ["ip", "netns", "exec", namespace, *runner]
    else:
        namespace = None
    try:
        result = subprocess.run(runner, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)
    finally:
        if namespace:
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    report = json.loads((tmp_path / "runs" / "by-hand" / "report.json").read_text())
    assert report["status"] == "completed", report["failures"]
    assert report["transport_security"].startswith("curve")
    assert '"status": "completed"' in result.stdout  # the recipe's last line shows the report
    assert sorted(p.name for p in (tmp_path / "parties").iterdir()) == sorted(
        f"{p}.json" for p in ["curator", "owner-1", "owner-2", "owner-3", "owner-4", "consumer"]
    )
