"""The code keeps its lint, format and type rules ([tool.ruff] and [tool.mypy] in pyproject.toml), and the
checks can fail.

ruff lints and format-checks the package, the tests and the benchmarks; mypy checks the whole package
strictly (every function typed), no module excused; no module of the package is longer than
:data:`MAX_LINES` lines (a longer one holds more than one responsibility: split it by them).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

# docs: its pages' Python blocks too (ruff formats the code blocks of Markdown files from 0.17)
PARTS = ["marketplace", "tests", "benchmarks", "docs"]


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NO_COLOR": "1", "PYTHONPATH": str(ROOT)},
    )


def test_ruff_lint_passes():
    result = _run("ruff", "check", "--no-cache", *PARTS)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_ruff_format_is_kept():
    result = _run("ruff", "format", "--check", "--no-cache", *PARTS)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


MAX_LINES = 600
"""The most lines a module of the package may have (the tests and benchmarks are not held to it)."""


def too_long(package: Path, most: int = MAX_LINES) -> dict[str, int]:
    """Every ``.py`` file under ``package`` longer than ``most`` lines, by its path, with its length."""
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in sorted(package.rglob("*.py"))}
    return {str(path.relative_to(package.parent)): n for path, n in lengths.items() if n > most}


def test_no_module_of_the_package_is_longer_than_the_limit():
    offenders = too_long(ROOT / "marketplace")
    assert offenders == {}, f"modules over {MAX_LINES} lines (split each by responsibility): " + ", ".join(
        f"{path} ({n} lines)" for path, n in offenders.items()
    )


def test_the_line_limit_names_each_offender_with_its_length(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "short.py").write_text("x = 1\n" * MAX_LINES)
    (package / "sub" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert too_long(package) == {"pkg/sub/long.py": MAX_LINES + 1}


def test_ruff_catches_an_unused_import_and_a_long_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    (tmp_path / "bad.py").write_text("import os\n\nX = '" + "x" * 130 + "'\n")
    result = _run("ruff", "check", "--no-cache", "bad.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "F401" in result.stdout and "E501" in result.stdout


@pytest.mark.slow
def test_mypy_passes_on_the_package():
    result = _run("mypy", "--cache-dir", "/dev/null")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Success" in result.stdout


def test_mypy_checks_the_whole_package_with_no_module_allowed_errors():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["files"] == ["marketplace"]
    excused = [
        o["module"]
        for o in config.get("overrides", [])
        if o.get("ignore_errors") or o.get("ignore_missing_imports") is False
    ]
    assert not excused, f"modules excused from the type check: {excused}"


@pytest.mark.slow
def test_mypy_catches_a_wrong_type_in_a_checked_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from marketplace.plugins import spec\n\n\ndef name() -> int:\n    return spec('x').name\n")
    result = _run("mypy", "--cache-dir", "/dev/null", "--config-file", str(ROOT / "pyproject.toml"), str(bad))
    assert result.returncode == 1
    assert 'Incompatible return value type (got "str", expected "int")' in result.stdout
