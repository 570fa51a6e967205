"""docs/serve.md, "Parties that bring their own data", runs as written: its three commands (the files,
the marketplace, a request with the consumer's own target) on loopback, its schema example
validates, and the agent's refusal it quotes is what an agent prints for such a file."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time

import pytest
import yaml
from conftest import ROOT

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "serve.md"


def section() -> str:
    text = DOC.read_text()
    start = text.index("## Parties that bring their own data")
    return text[start : text.index("\n## ", start + 5)]


def commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", section(), re.DOTALL)[1]
    return [line for line in block.splitlines() if line.startswith("marketplace ")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def argv(line: str, port: int) -> list[str]:
    words = shlex.split(line.replace("tcp://127.0.0.1:7700", f"tcp://127.0.0.1:{port}"))
    return [sys.executable, "-m", "marketplace", *words[1:]]


def test_the_pages_three_commands_serve_a_request_with_the_consumers_own_target(tmp_path):
    shares, serve, request = commands()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MARKETPLACE_DATA": str(tmp_path / "no-data-cache")}
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    made = subprocess.run(argv(shares, 0), cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert made.returncode == 0, made.stderr
    port = free_port()
    server = subprocess.Popen(
        [*argv(serve, port), "--endpoint", f"tcp://127.0.0.1:{port}", "--session-port", str(free_port())],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "market" / "server.json").exists():
            assert server.poll() is None and time.monotonic() < deadline, server.communicate()
            time.sleep(0.1)
        asked = subprocess.run(
            [*argv(request, port), "--out", "out", "--quiet", "--wait", "300"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert asked.returncode == 0, asked.stderr
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        assert report["status"] == "completed" and report["deployment"]["data"] == "own"
        assert report["lifetime"]["consumer"] == "alice"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
        out, err = server.communicate(timeout=120)
    assert "parties bring their own data" in err and "this server holds no party's rows" in err


def test_the_schema_example_is_a_valid_data_section():
    from marketplace.data.config import DataConfig
    from marketplace.schema import build

    example = re.search(r"```yaml\n(.*?)```", section(), re.DOTALL)[1]
    data = build(DataConfig, yaml.safe_load(example)["data"])
    assert data.schema_only and data.schema.feature_names == ("f0", "f1") and data.schema.outside == "clip"


def test_the_quoted_refusal_is_what_an_agent_prints(tmp_path):
    quoted = re.search(r"^\s*(marketplace agent: owner-2: .*)$", section(), re.MULTILINE)[1]
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "shares",
            str(ROOT / "scenarios" / "sketch-quickstart.yaml"),
            "--out",
            "own-data",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert made.returncode == 0, made.stderr
    lines = (tmp_path / "own-data" / "owner-2.csv").read_text().splitlines()
    fields = lines[5].split(",")
    fields[1] = "99"
    lines[5] = ",".join(fields)
    (tmp_path / "owner-2.csv").write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "agent",
            "--market",
            "tcp://127.0.0.1:9",
            "--keys",
            "kit",
            "--ids",
            "owner-2",
            "--data",
            "owner-2=owner-2.csv",
            "--schema",
            "own-data/market.yaml",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert quoted in done.stderr.splitlines()
