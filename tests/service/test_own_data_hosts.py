"""A served marketplace across machines, each party holding only its own files: the server (the
market file's public schema and keys only), two owner agents (each with its owners' CSVs and its own
kit) and a consumer (its own target and test CSVs, its own kit), each in a network namespace of its
own that this test makes (`ip netns`), on one bridged link, with no shared data cache and no shared
key folder. Three requests complete, every ledger charges what was released, and nothing the
server keeps (state, logs, session folders) holds an owner's or the consumer's rows.

Needs root and iproute2; skipped, with the reason, otherwise.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from system_tools import skip_unless_tools

from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

pytestmark = pytest.mark.slow

HOSTS = ["server", "agent-a", "agent-b", "consumer"]
SERVER_IP = "10.233.0.1"
EPS = 0.25


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise AssertionError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


class Hosts:
    """One namespace per machine; a bridge in the server's namespace (10.233.0.1/24) with a veth link
    to each other machine (10.233.0.<i+1>): one LAN, no route anywhere else."""

    def __init__(self, tag: str) -> None:
        self.names = {host: f"mk{tag}-{host}" for host in HOSTS}
        self.made: list[str] = []

    def create(self) -> None:
        for ns in self.names.values():
            ip("netns", "add", ns)
            self.made.append(ns)
            ip("-n", ns, "link", "set", "lo", "up")
        server = self.names["server"]
        ip("-n", server, "link", "add", "br0", "type", "bridge")
        ip("-n", server, "addr", "add", f"{SERVER_IP}/24", "dev", "br0")
        ip("-n", server, "link", "set", "br0", "up")
        for i, host in enumerate(HOSTS[1:], start=1):
            near, far = f"s{i}", f"h{i}"
            ip("link", "add", near, "netns", server, "type", "veth", "peer", "name", far, "netns", self.names[host])
            ip("-n", server, "link", "set", near, "master", "br0")
            ip("-n", server, "link", "set", near, "up")
            ip("-n", self.names[host], "addr", "add", f"10.233.0.{i + 1}/24", "dev", far)
            ip("-n", self.names[host], "link", "set", far, "up")

    def exec(self, host: str) -> list[str]:
        return ["ip", "netns", "exec", self.names[host]]

    def delete(self) -> None:
        for ns in self.made:
            ip("netns", "delete", ns, check=False)


@pytest.fixture
def hosts():
    if os.geteuid() != 0:
        pytest.skip(f"network namespaces need root; this test runs as uid {os.geteuid()}")
    skip_unless_tools("ip", why="network namespaces with veth links")
    made = Hosts(str(os.getpid() % 100000))
    try:
        made.create()
    except AssertionError as err:
        made.delete()
        pytest.skip(f"cannot make network namespaces with a bridge here: {err}")
    yield made
    made.delete()


STARTED: list[subprocess.Popen] = []


def start(hosts: Hosts, host: str, home: Path, *args: str) -> subprocess.Popen:
    """``marketplace ARGS`` on ``host``, in its own folder, with a data cache of its own (empty)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MARKETPLACE_DATA": str(home / "empty-data-cache"), "HOME": str(home)}
    proc = subprocess.Popen(
        [*hosts.exec(host), sys.executable, "-m", "marketplace", *args],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    STARTED.append(proc)
    return proc


@pytest.fixture(autouse=True)
def nothing_left():
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def own_folder(root: Path, name: str, *files: Path) -> Path:
    folder = root / name
    folder.mkdir(mode=0o700)
    for path in files:
        shutil.copy2(path, folder / path.name)
    return folder


def write_parties_files(tmp_path: Path) -> Path:
    """A simulation's parties as files, only to have files to bring (from here on nobody simulates
    anything), and a market file with a lifetime budget. Returns the folder they are in."""
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "shares",
            str(ROOT / "scenarios" / "sketch-quickstart.yaml"),
            "--out",
            str(tmp_path / "written"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert made.returncode == 0, made.stderr
    written = tmp_path / "written"
    market_file = written / "market.yaml"
    market = yaml.safe_load(market_file.read_text())
    market["lifetime"] = {"budget": {"epsilon": 2.0}}
    market_file.write_text(yaml.safe_dump(market, sort_keys=False))
    return written


def give_each_machine_its_own_files(tmp_path: Path, written: Path) -> tuple[Path, dict, Path]:
    """The server's folder (the market file, its state made by ``serve --init``), each agent's (its
    owners' CSVs and kits) and the consumer's (its target and test CSVs, its scenario and kit); the
    kits are then removed from where ``--init`` wrote them. Returns the server's home, agent ->
    (home, owners), and the consumer's home."""
    server_home = own_folder(tmp_path, "server", written / "market.yaml")
    init = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "serve",
            "market.yaml",
            "--state",
            "state",
            "--init",
            "--kits",
            str(tmp_path / "kits"),
            "--consumers",
            "alice",
        ],
        cwd=server_home,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert init.returncode == 0, init.stderr
    kits = tmp_path / "kits"
    homes = {}
    for agent, owners in (("agent-a", ["owner-1", "owner-2"]), ("agent-b", ["owner-3", "owner-4"])):
        home = own_folder(tmp_path, agent, *(written / f"{o}.csv" for o in owners))
        (home / "kit").mkdir(mode=0o700)
        for owner in owners:
            for path in (kits / owner).iterdir():
                shutil.copy2(path, home / "kit" / path.name)
        homes[agent] = (home, owners)
    consumer_home = own_folder(
        tmp_path,
        "consumer",
        written / "target.csv",
        written / "test.csv",
        ROOT / "scenarios" / "sketch-quickstart.yaml",
    )
    shutil.copytree(kits / "consumers" / "alice", consumer_home / "kit")
    shutil.rmtree(kits)  # every kit is now only where its party is
    return server_home, homes, consumer_home


def start_server_and_agents(
    hosts: Hosts, server_home: Path, homes: dict, endpoint: str
) -> tuple[subprocess.Popen, list[subprocess.Popen]]:
    """The server, without owners of its own, on its machine; each agent, with its owners' files, on its own."""
    server = start(
        hosts,
        "server",
        server_home,
        "serve",
        "market.yaml",
        "--state",
        "state",
        "--no-owners",
        "--endpoint",
        "tcp://0.0.0.0:7700",
        "--advertise",
        SERVER_IP,
    )
    agents = [
        start(
            hosts,
            agent,
            home,
            "agent",
            "--market",
            endpoint,
            "--keys",
            "kit",
            "--ids",
            ",".join(owners),
            "--data",
            ",".join(f"{o}={o}.csv" for o in owners),
        )
        for agent, (home, owners) in homes.items()
    ]
    return server, agents


def wait_for_every_owner(server: subprocess.Popen, server_home: Path) -> None:
    """Until the server's state says its four owners are present (the agents check their files,
    connect, ping), the server still running, within two minutes."""
    deadline = time.monotonic() + 120
    log = server_home / "state" / "server.json"
    while not log.exists():
        assert server.poll() is None, server.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.2)
    while json.loads(log.read_text())["owners_present"] < 4:
        assert server.poll() is None, server.communicate()
        assert time.monotonic() < deadline, "the agents' owners never came"
        time.sleep(0.1)


def request_from_the_consumer(
    hosts: Hosts, consumer_home: Path, endpoint: str, i: int, agents: list[subprocess.Popen]
) -> dict:
    """Request ``i``, from the consumer's machine with its own files; returns its report."""
    request = start(
        hosts,
        "consumer",
        consumer_home,
        "request",
        "sketch-quickstart.yaml",
        "--market",
        endpoint,
        "--keys",
        "kit",
        "--data",
        "target.csv",
        "--test",
        "test.csv",
        "--out",
        f"out-{i}",
        "--quiet",
        "--wait",
        "300",
        "--set",
        f"sketch.epsilon={EPS}",
        "--set",
        "sketch.samples=2000",
    )
    out, err = request.communicate(timeout=400)
    assert request.returncode == 0, (out, err, [a.poll() for a in agents])
    return json.loads((consumer_home / f"out-{i}" / "report.json").read_text())


def check_owner_ledgers(homes: dict) -> None:
    """Every owner's ledger, in its agent's kit, charged the three requests and committed them."""
    for home, owners in homes.values():
        for owner in owners:
            with LifetimeLedger.read(ledger_file(home / "kit", owner)) as ledger:
                assert ledger.spent().eps == pytest.approx(3 * EPS)
                assert [r.state for r in ledger.history()] == ["committed"] * 3


def check_no_row_in_the_servers_files(written: Path, server_home: Path) -> None:
    """Nothing the server keeps holds a row of anybody's: look for every value written in the parties' files."""
    values = set()
    for path in written.glob("*.csv"):
        for line in path.read_text().splitlines()[1:]:
            values.update(float(v) for v in line.split(",")[:5] if len(v) > 8)
    kept = set()
    for path in (server_home / "state").rglob("*"):
        if path.is_file():
            kept.update(float(v) for v in re.findall(r"-?\d+\.\d{6,}(?:e-?\d+)?", path.read_text(errors="replace")))
    assert len(values) > 10_000 and kept  # the server's files do hold numbers (reports): none of them a row's
    leaked = sorted(values & kept)
    assert not leaked, f"{len(leaked)} of the parties' values are in the server's files, e.g. {leaked[:3]}"


def test_three_machines_each_with_only_its_own_files_serve_three_requests(hosts, tmp_path):
    written = write_parties_files(tmp_path)
    server_home, homes, consumer_home = give_each_machine_its_own_files(tmp_path, written)
    endpoint = f"tcp://{SERVER_IP}:7700"
    server, agents = start_server_and_agents(hosts, server_home, homes, endpoint)
    try:
        wait_for_every_owner(server, server_home)
        reports = [request_from_the_consumer(hosts, consumer_home, endpoint, i, agents) for i in range(3)]
        for report in reports:
            assert report["status"] == "completed" and report["deployment"]["data"] == "own"
            assert not report["lifetime"]["declined"]
        check_owner_ledgers(homes)
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=120)
        for agent in agents:
            agent.communicate(timeout=60)
    check_no_row_in_the_servers_files(written, server_home)
