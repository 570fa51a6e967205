"""Parties that bring their own files, from the command line: ``marketplace shares`` writes them from a
simulation, a schema-only market file validates but is not simulated, and an agent or a consumer
with a bad file refuses to start before it sends anything."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from marketplace import plugins
from marketplace.api import load
from marketplace.data.own_files import load_own_rows
from marketplace.parties import make_world

SKETCH = ROOT / "scenarios" / "sketch-quickstart.yaml"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "marketplace", *args], capture_output=True, text=True, cwd=cwd, timeout=240
    )


@pytest.fixture(scope="module")
def shares(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shares") / "market"
    done = cli("shares", str(SKETCH), "--out", str(out), cwd=out.parent)
    assert done.returncode == 0, done.stderr
    return out


def test_shares_writes_every_partys_rows_and_a_market_file_of_their_schema(shares):
    simulated = make_world(load(SKETCH).config, plugins.exchange(load(SKETCH).config.protocol))
    market = load(shares / "market.yaml").config
    assert market.data.schema_only and market.data.schema.dim == simulated.dim
    for i, rows in enumerate(simulated.owners):
        own = load_own_rows(shares / f"owner-{i + 1}.csv", market.data.schema, party=f"owner-{i + 1}")
        lower, upper = market.data.schema.lower, market.data.schema.upper
        assert np.array_equal(own.X, np.clip(rows.X, lower, upper)) and np.array_equal(own.y, rows.y)
    target = load_own_rows(shares / "target.csv", market.data.schema, party="consumer")
    assert len(target) == len(simulated.validation)


def test_a_schema_only_market_validates_and_is_not_simulated(shares, tmp_path):
    checked = cli("validate", str(shares / "market.yaml"), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "bringing their own rows" in checked.stderr
    run = cli("run", str(shares / "market.yaml"), "--driver", "inprocess", "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert run.returncode == 2
    assert "data.schema" in run.stderr and "marketplace serve" in run.stderr
    assert not (tmp_path / "r").exists()


def test_a_schema_only_marketplace_refuses_to_serve_owners_without_files(shares, tmp_path):
    done = cli("serve", str(shares / "market.yaml"), "--state", str(tmp_path / "state"), cwd=tmp_path)
    assert done.returncode == 2
    assert "--owner-data DIR" in done.stderr and "--no-owners" in done.stderr


def listener() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.0)
    return sock


def nothing_connected(sock: socket.socket) -> bool:
    try:
        sock.accept()
    except BlockingIOError:
        return True
    return False


def test_an_agent_with_a_bad_file_refuses_to_start_and_sends_nothing(shares, tmp_path):
    bad = tmp_path / "bad.csv"
    lines = (shares / "owner-2.csv").read_text().splitlines()
    lines[5] = lines[5].replace(lines[5].split(",")[1], "99", 1)  # outside the public range [-12, 12]
    bad.write_text("\n".join(lines) + "\n")
    server = listener()
    port = server.getsockname()[1]
    done = cli(
        "agent",
        "--market",
        f"tcp://127.0.0.1:{port}",
        "--keys",
        str(tmp_path),
        "--ids",
        "owner-1,owner-2",
        "--data",
        f"owner-1={shares / 'owner-1.csv'},owner-2={bad}",
        "--schema",
        str(shares / "market.yaml"),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert f"owner-2: {bad}: line 6, column 'f1': expected a number in [-12, 12]" in done.stderr
    assert "found one outside it" in done.stderr and "found 99" not in done.stderr
    assert nothing_connected(server)


def test_an_agent_with_files_but_no_schema_to_check_them_against_is_refused(shares, tmp_path):
    done = cli(
        "agent",
        "--market",
        "tcp://127.0.0.1:9",
        "--keys",
        str(tmp_path),
        "--ids",
        "owner-1",
        "--data",
        str(shares / "owner-1.csv"),
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "--schema MARKET.yaml" in done.stderr


def test_a_consumer_with_a_bad_target_refuses_before_sending_its_request(shares, tmp_path):
    kit = tmp_path / "kit"
    kit.mkdir()
    import zmq.auth

    zmq.auth.create_certificates(str(kit), "alice")
    zmq.auth.create_certificates(str(kit), "server")
    (kit / "server.key_secret").unlink()
    (kit / "market.yaml").write_text((shares / "market.yaml").read_text())
    bad = tmp_path / "target.csv"
    bad.write_text("f0,f1,f2,f3,f4,label,group\n0,0,0,0,0,5,component-0\n")
    server = listener()
    done = cli(
        "request",
        str(SKETCH),
        "--market",
        f"tcp://127.0.0.1:{server.getsockname()[1]}",
        "--keys",
        str(kit),
        "--data",
        str(bad),
        "--out",
        str(tmp_path / "out"),
        "--wait",
        "30",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert (
        "consumer (target): " in done.stderr
        and "line 2, column 'label'" in done.stderr
        and "found '5'" not in done.stderr
    )
    assert nothing_connected(server)


def test_an_owner_of_a_schema_only_marketplace_without_its_file_cannot_start(shares, tmp_path):
    done = cli(
        "owner",
        "--scenario",
        str(shares / "market.yaml"),
        "--id",
        "owner-1",
        "--endpoint",
        "tcp://127.0.0.1:9",
        "--insecure",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "owner-1 must bring its own rows (--data FILE.csv)" in done.stderr


def test_a_consumer_target_for_a_simulated_marketplace_is_refused(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("a\n1\n")
    done = cli(
        "consumer",
        "--scenario",
        str(SKETCH),
        "--endpoint",
        "tcp://127.0.0.1:9",
        "--insecure",
        "--data",
        str(target),
        cwd=tmp_path,
    )
    assert done.returncode == 2 and "data.schema" in done.stderr


MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=600)
print(json.dumps({"returncode": done.returncode, "stderr": done.stderr,
                  "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""
"""Runs a command and reports its exit status, stderr and peak resident memory (that command's alone)."""


def measured(*args: str, cwd: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, sys.executable, "-m", "marketplace", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def sparse_csv(path: Path, header: str) -> Path:
    """A 2 GB file that takes no disk: a header, a row, then a hole of zero bytes."""
    with path.open("wb") as f:
        f.write(f"{header}\n".encode())
        f.seek(2 * 1024**3)
        f.write(b"\n")
    return path


@pytest.mark.slow
def test_an_agents_2_gb_file_is_refused_at_exit_2_with_little_memory(shares, tmp_path):
    big = sparse_csv(tmp_path / "owner-1.csv", "f0,f1,f2,f3,f4,label,group")
    result = measured(
        "agent",
        "--market",
        "tcp://127.0.0.1:9",
        "--keys",
        str(tmp_path),
        "--ids",
        "owner-1",
        "--data",
        str(big),
        "--schema",
        str(shares / "market.yaml"),
        cwd=tmp_path,
    )
    assert result["returncode"] == 2 and "Traceback" not in result["stderr"], result["stderr"]
    assert f"owner-1: {big} is 2147483649 bytes" in result["stderr"] and "--max-bytes" in result["stderr"]
    assert result["peak_mb"] < 500, f"peak memory {result['peak_mb']:.0f} MB"


@pytest.mark.slow
def test_a_consumers_target_without_line_ends_is_refused_at_exit_2_with_little_memory(shares, tmp_path):
    big = sparse_csv(tmp_path / "target.csv", "f0,f1,f2,f3,f4,label,group")
    result = measured(
        "request",
        str(SKETCH),
        "--market",
        "tcp://127.0.0.1:9",
        "--keys",
        str(tmp_path),
        "--data",
        str(big),
        "--schema",
        str(shares / "market.yaml"),
        "--max-bytes",
        str(3 << 30),
        "--out",
        str(tmp_path / "out"),
        cwd=tmp_path,
    )
    assert result["returncode"] == 2 and "Traceback" not in result["stderr"], result["stderr"]
    assert "a row longer than" in result["stderr"] and "--max-row-chars" in result["stderr"]
    assert result["peak_mb"] < 500, f"peak memory {result['peak_mb']:.0f} MB"
