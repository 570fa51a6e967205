"""Parties on different hosts: the curator, each owner and the consumer in network namespaces of
their own that this test makes (`ip netns`), each linked to the curator's by a veth pair on a
private /30 link and nothing else. They connect over TCP with CURVE, holding provisioned kits, as
parties on different machines would; the assembled report must equal `marketplace run` of the same
scenario and seed.

Needs root and iproute2; skipped, with the reason, otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import QUICKSTART, ROOT
from system_tools import skip_unless_tools

pytestmark = pytest.mark.slow

PARTIES = ["curator", "owner-1", "owner-2", "owner-3", "owner-4", "consumer"]
PORT = 5555


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise AssertionError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


class Hosts:
    """One namespace per party; party i (not the curator) reaches the curator at 10.231.i.1 over
    its own veth link, 10.231.i.0/30, and has no other route."""

    def __init__(self, tag: str) -> None:
        self.names = {party: f"mkt{tag}-{party}" for party in PARTIES}
        self.made: list[str] = []

    def create(self) -> None:
        for ns in self.names.values():
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        for i, party in enumerate(PARTIES[1:], start=1):
            near, far = f"c{i}", f"p{i}"  # the curator's end, the party's end
            ip(
                "link",
                "add",
                near,
                "netns",
                self.names["curator"],
                "type",
                "veth",
                "peer",
                "name",
                far,
                "netns",
                self.names[party],
            )
            ip("-n", self.names["curator"], "addr", "add", f"10.231.{i}.1/30", "dev", near)
            ip("-n", self.names[party], "addr", "add", f"10.231.{i}.2/30", "dev", far)
            ip("-n", self.names["curator"], "link", "set", near, "up")
            ip("-n", self.names[party], "link", "set", far, "up")

    def curator_address(self, party: str) -> str:
        return f"10.231.{PARTIES.index(party)}.1"

    def exec(self, party: str) -> list[str]:
        return ["ip", "netns", "exec", self.names[party]]

    def delete(self) -> None:
        for ns in self.made:  # deleting a namespace deletes the veth ends in it
            ip("netns", "delete", ns, check=False)


@pytest.fixture
def hosts():
    if os.geteuid() != 0:
        pytest.skip(f"network namespaces need root; this test runs as uid {os.geteuid()}")
    skip_unless_tools("ip", why="network namespaces with veth links")
    made = Hosts(str(os.getpid()))
    try:
        made.create()
    except AssertionError as err:
        made.delete()
        pytest.skip(f"cannot make network namespaces with veth links here: {err}")
    yield made
    made.delete()


def shim(folder: Path) -> dict[str, str]:
    """`marketplace` on PATH running this checkout, as an installed package would be."""
    (folder / "bin").mkdir()
    script = folder / "bin" / "marketplace"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m marketplace "$@"\n')
    script.chmod(0o755)
    return dict(os.environ, PATH=f"{folder / 'bin'}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))


def test_parties_in_separate_network_namespaces_run_the_quickstart_over_tcp_with_curve(hosts, tmp_path):
    env = shim(tmp_path)
    made = subprocess.run(
        [
            "marketplace",
            "provision",
            str(QUICKSTART),
            "--out",
            str(tmp_path / "kits"),
            "--endpoint",
            f"tcp://curator.invalid:{PORT}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    probe = "import socket, sys; socket.create_connection((sys.argv[1], 9), timeout=2)"
    other_link = subprocess.run(
        [*hosts.exec("owner-1"), sys.executable, "-c", probe, hosts.curator_address("owner-2")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "Network is unreachable" in other_link.stderr, "owner-1's host must reach only its own link to the curator"

    procs, logs = {}, tmp_path / "logs"
    logs.mkdir()

    def start(party: str) -> None:
        party_env = (
            dict(env, MARKETPLACE_ENDPOINT=f"tcp://{hosts.curator_address(party)}:{PORT}")
            if party != "curator"
            else env
        )
        out = open(logs / f"{party}.log", "w")
        procs[party] = subprocess.Popen(
            [
                *hosts.exec(party),
                "sh",
                str(tmp_path / "kits" / party / "start.sh"),
                "--report",
                str(tmp_path / "parties" / f"{party}.json"),
            ],
            env=party_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )

    try:
        start("curator")
        for party in PARTIES[1:]:
            start(party)
        codes = {party: proc.wait(timeout=240) for party, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert codes == dict.fromkeys(PARTIES, 0), {
        p: (logs / f"{p}.log").read_text()[-1500:] for p, c in codes.items() if c
    }

    assembled = subprocess.run(
        [
            "marketplace",
            "assemble",
            str(tmp_path / "parties"),
            "--scenario",
            str(QUICKSTART),
            "--out",
            str(tmp_path / "run"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert assembled.returncode == 0, assembled.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["status"] == "completed" and report["transport_security"].startswith("curve")
    for party in PARTIES[1:]:  # each reached the curator at its own link's address
        assert report["party_details"][party]["driver"]["endpoint"] == f"tcp://{hosts.curator_address(party)}:{PORT}"

    reference = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "run",
            str(QUICKSTART),
            "--driver",
            "inprocess",
            "--quiet",
            "--out",
            str(tmp_path / "reference"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert reference.returncode == 0, reference.stderr
    expected = json.loads((tmp_path / "reference" / "report.json").read_text())
    assert report["selection"] == expected["selection"] and report["metrics"] == expected["metrics"]
    assert {k: v["count"] for k, v in report["messages"]["by_kind"].items()} == {
        k: v["count"] for k, v in expected["messages"]["by_kind"].items()
    }
