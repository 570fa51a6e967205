"""The compose files on a real Docker engine: the image built from the Dockerfile users build, each
compose file run as it ships (docker-compose.run.yml: one scenario; docker-compose.yml: a marketplace
that stays up), by a host user whose uid is neither root nor the containers' 1000.

The test starts its own engine (tests/docker_engine.py) and skips, naming the reason, when no
engine can be started or when any tool it needs is missing (dockerd, docker, a compose client,
setpriv; mmdebstrap when the base image cannot be pulled), with the command that installs it. When
the public base image cannot be pulled (no Docker Hub here), it builds a stand-in under the same tag
from Debian packages (deploy/standin-python-base.sh), so the Dockerfile stays the one users use.
It removes its containers, networks, volumes and images, and the engine with everything it stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from docker_engine import DockerEngine, EngineUnavailable, compose_command
from system_tools import skip_unless_tools

pytestmark = pytest.mark.slow

HOST_UID = 4242
"""The host user who runs compose: neither root nor the image's user (1000)."""
PARTIES = ["curator", "owner-1", "owner-2", "owner-3", "owner-4", "consumer"]
PROJECT_FILES = (
    "Dockerfile",
    ".dockerignore",
    "docker-compose.yml",
    "docker-compose.run.yml",
    "docker-compose.own.yml",
    "pyproject.toml",
    "README.md",
    "marketplace",
    "scenarios",
    "data-cache",
)


@pytest.fixture(scope="module")
def engine():
    skip_unless_tools("dockerd", "docker", "setpriv", why="a compose run on a real Docker engine")
    try:
        compose_command()
    except EngineUnavailable as err:
        pytest.skip(str(err))
    engine = DockerEngine()
    try:
        t0 = time.monotonic()
        engine.start()
        engine.started_s = time.monotonic() - t0
    except EngineUnavailable as err:
        engine.stop()
        pytest.skip(f"no Docker engine could be started: {err}")
    try:
        yield engine
    finally:
        engine.stop()


def project_owned_by(uid: int, folder: Path) -> Path:
    """A copy of the project as a user with uid ``uid`` and umask 077 would have it: every file and
    folder theirs and private (0600 / 0700)."""
    project = folder / "project"
    project.mkdir()
    for name in PROJECT_FILES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(source, project / name)
    for path in [project, *project.rglob("*")]:
        os.chown(path, uid, uid)
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    os.chmod(folder, 0o755)
    return project


def as_host_user(engine: DockerEngine, home: Path) -> tuple[list[str], dict[str, str]]:
    """The command prefix and environment that run a client as uid HOST_UID with access to the engine."""
    os.chmod(engine.root, 0o711)  # the socket's folder: passable, not listable
    os.chown(engine.socket, 0, HOST_UID)
    os.chmod(engine.socket, 0o660)
    home.mkdir(exist_ok=True)
    os.chown(home, HOST_UID, HOST_UID)
    env = dict(engine.env, HOME=str(home), DOCKER_CONFIG=str(home / ".docker"))
    return ["setpriv", f"--reuid={HOST_UID}", f"--regid={HOST_UID}", "--clear-groups"], env


def ensure_base_image(engine: DockerEngine) -> str:
    """python:3.11-slim, pulled, or else built from Debian packages under the same tag (once per engine)."""
    if engine.docker("image", "inspect", "python:3.11-slim", check=False).returncode == 0:
        return "already here"
    pulled = engine.docker("pull", "python:3.11-slim", check=False, timeout=300)
    if pulled.returncode == 0:
        return "pulled"
    skip_unless_tools(
        "mmdebstrap", why="python:3.11-slim cannot be pulled here, and the stand-in base image is built with mmdebstrap"
    )
    archive = standin_archive()
    if archive.is_file():
        loaded = engine.docker("load", "--input", str(archive), check=False, timeout=300).returncode == 0
        if loaded and engine.docker("image", "inspect", "python:3.11-slim", check=False).returncode == 0:
            return f"stand-in loaded from {archive}"
        archive.unlink(missing_ok=True)  # unreadable: built again below
    engine.run(["sh", str(ROOT / "deploy" / "standin-python-base.sh"), "python:3.11-slim"], timeout=900)
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    if engine.docker("save", "--output", str(partial), "python:3.11-slim", check=False, timeout=300).returncode == 0:
        partial.replace(archive)  # whole or not at all: a run killed while saving leaves no archive
    else:
        partial.unlink(missing_ok=True)
    return "stand-in from Debian packages"


def standin_archive() -> Path:
    """Where the stand-in base image is kept between test runs (``docker save``): building it takes
    minutes (mmdebstrap downloads and unpacks Debian), loading it seconds. The name holds a digest of
    deploy/standin-python-base.sh, so a changed recipe builds anew; the packages in it are those of the
    day it was built (remove the folder, ``$XDG_CACHE_HOME/marketplace-tests``, to take newer ones)."""
    digest = hashlib.sha256((ROOT / "deploy" / "standin-python-base.sh").read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "marketplace-tests"
    return cache / f"standin-python-3.11-slim-{digest}.tar"


@pytest.fixture
def host_folder():
    """A folder the host user can reach (pytest's tmp_path sits under a root-only folder)."""
    folder = Path(tempfile.mkdtemp(prefix="mkt-compose-", dir="/tmp"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.timeout(1800)  # the stand-in base and the image build download packages: minutes, not seconds
def test_compose_runs_the_quickstart_on_a_real_engine_as_any_host_user(engine, host_folder, tmp_path):
    times = {"engine start": engine.started_s}
    compose = compose_command()
    project = project_owned_by(HOST_UID, host_folder)
    prefix, env = as_host_user(engine, host_folder / "home")
    name = f"mkt{os.getpid()}"
    up = [
        *prefix,
        *compose,
        "--project-name",
        name,
        "--project-directory",
        str(project),
        "-f",
        str(project / "docker-compose.run.yml"),
    ]

    def timed(label: str, fn):
        t0 = time.monotonic()
        result = fn()
        times[label] = time.monotonic() - t0
        return result

    base = timed("base image", lambda: ensure_base_image(engine))
    try:
        timed("image build", lambda: engine.run([*up, "build", "provision"], env=env, cwd=project, timeout=1800))
        result = timed(
            "compose up", lambda: engine.run([*up, "up", "--no-color"], env=env, cwd=project, timeout=900, check=False)
        )
        logs = engine.run([*up, "logs", "--no-color"], env=env, cwd=project, check=False).stdout
        containers = inspect_containers(engine, name)
        first = read_report(project, result)
        # the same file again, now as root: fresh kits into the existing volumes, a new run id
        again = timed(
            "compose up as root",
            lambda: engine.run(up[len(prefix) :] + ["up", "--no-color"], cwd=project, timeout=900, check=False),
        )
        second = read_report(project, again)
    finally:
        # the images stay for the next test of this module; the engine's teardown removes everything it stored
        timed("clean up", lambda: engine.run([*up, "down", "--volumes"], env=env, cwd=project, check=False))
    print(
        f"\nreal engine ({engine.driver} storage{' in memory' if engine.in_memory else ''}, {base} base): "
        + ", ".join(f"{k} {v:.0f} s" for k, v in times.items())
    )

    for report in (first, second):
        assert report["status"] == "completed", report["failures"]
    assert first["run_id"] != second["run_id"], "each up provisions anew"
    report = first
    assert report["transport_security"].startswith("curve")
    assert [p["id"] for p in report["parties"]] == PARTIES
    assert len({p["host"] for p in report["parties"]}) == len(PARTIES), "one container per party"
    reference = marketplace_run(tmp_path)
    assert report["selection"] == reference["selection"]
    assert report["metrics"] == reference["metrics"]
    assert counts(report) == counts(reference)
    assert report["messages"]["consistency"]["agree"] and report["checks"]["central_replay"]["matches"]

    assert " INFO curator finished" in logs
    assert not [line for line in logs.splitlines() if " WARNING " in line or " ERROR " in line], (
        "a healthy run logs no warning"
    )

    for party in PARTIES:  # each party mounts its own kit (read-only) and the reports volume, nothing else
        mounts = containers[party]
        assert sorted(m["Name"].removeprefix(f"{name}_") for m in mounts) == sorted([f"kit-{party}", "reports"]), mounts
        assert [m["RW"] for m in mounts if m["Destination"] == "/kit"] == [False]
        assert containers[party + ":networks"] == [f"{name}_market"]


def read_report(project: Path, up: subprocess.CompletedProcess) -> dict:
    """runs/compose/report.json, which must belong to the host user (as must ./runs), whoever ran compose."""
    report_file = project / "runs" / "compose" / "report.json"
    assert report_file.exists(), (
        f"compose up exited {up.returncode}; no report.\n{up.stdout[-4000:]}\n{up.stderr[-2000:]}"
    )
    assert (report_file.stat().st_uid, (project / "runs").stat().st_uid) == (HOST_UID, HOST_UID), (
        "the host user's files"
    )
    report = json.loads(report_file.read_text())
    report_file.unlink()
    return report


def inspect_containers(engine: DockerEngine, project: str) -> dict[str, list]:
    ids = engine.docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={project}").stdout.split()
    found = {}
    for item in json.loads(engine.docker("inspect", *ids).stdout):
        service = item["Config"]["Labels"]["com.docker.compose.service"]
        found[service] = item["Mounts"]
        found[service + ":networks"] = sorted(item["NetworkSettings"]["Networks"])
    return found


def marketplace_run(tmp_path: Path) -> dict:
    """`marketplace run` of the same scenario and seed, for comparison."""
    out = tmp_path / "reference"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "run",
            str(ROOT / "scenarios" / "quickstart.yaml"),
            "--driver",
            "inprocess",
            "--quiet",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    return json.loads((out / "report.json").read_text())


def counts(report: dict) -> dict:
    """Message counts per kind (bytes differ: each provisioning draws its own run id, which every envelope carries)."""
    return {kind: row["count"] for kind, row in report["messages"]["by_kind"].items()}


def test_the_compose_file_is_read_the_same_by_compose_clients():
    """The file stays within what both the v2 plugin and docker-compose 1.29 read: no top-level
    `name`, conditions from the compose specification, build options both accept."""
    for file in ("docker-compose.yml", "docker-compose.run.yml", "docker-compose.own.yml"):
        compose = yaml.safe_load((ROOT / file).read_text())
        assert "name" not in compose and "version" not in compose
        for service in compose["services"].values():
            for condition in (service.get("depends_on") or {}).values():
                assert condition["condition"] in (
                    "service_started",
                    "service_healthy",
                    "service_completed_successfully",
                )
            assert set(service.get("build", {})) <= {"context", "network"}


def test_a_missing_tool_skips_naming_it_and_its_install_command(monkeypatch):
    """Whichever of a test's tools is missing, the test skips (never fails), naming each missing one."""
    import system_tools

    present = {"docker": "/usr/bin/docker"}
    monkeypatch.setattr(system_tools.shutil, "which", lambda tool: present.get(tool))
    with pytest.raises(
        pytest.skip.Exception,
        match=r"base image.*needs dockerd, mmdebstrap, not on PATH "
        r"\(Debian: dockerd: apt-get install docker.io; mmdebstrap: apt-get install mmdebstrap",
    ):
        skip_unless_tools("docker", "dockerd", "mmdebstrap", why="base image")
    assert system_tools.missing_tools("docker") is None


MARKET_OWNERS = ["owner-1", "owner-2", "owner-3", "owner-4"]


@pytest.mark.timeout(1800)
def test_compose_keeps_a_marketplace_up_and_its_ledgers_across_a_restart(engine, host_folder):
    """docker-compose.yml: `up -d` starts the server and four owner agents and they stay; three
    consumers' requests arrive with `compose run --rm consumer`; owner-3's small budget runs out;
    `compose restart` keeps every key and ledger, and a fourth request is charged on top."""
    compose = compose_command()
    project = project_owned_by(HOST_UID, host_folder)  # as the first test's: its image build is reused whole
    name = f"mktup{os.getpid()}"
    up = [
        *compose,
        "--project-name",
        name,
        "--project-directory",
        str(project),
        "-f",
        str(project / "docker-compose.yml"),
    ]
    ensure_base_image(engine)

    def request(consumer: str) -> subprocess.CompletedProcess:
        return engine.run(
            [
                *up,
                "run",
                "--rm",
                "-T",
                "consumer",
                "/scenario/sketch-quickstart.yaml",
                "--set",
                "sketch.epsilon=0.4",
                "--keys",
                f"/kits/{consumer}",
                "--quiet",
                "--out",
                f"runs/{consumer}-{time.monotonic_ns()}",
            ],
            cwd=project,
            timeout=600,
            check=False,
        )

    def wait_for_owners(since: int) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            logs = engine.run([*up, "logs", "--no-color", "server"], cwd=project, check=False).stdout
            if sum(f"owner {o} present" in line for line in logs.splitlines()[since:] for o in MARKET_OWNERS) >= 4:
                return
            time.sleep(1.0)
        raise AssertionError("the owners did not join the marketplace:\n" + logs[-3000:])

    try:
        engine.run([*up, "build", "server"], cwd=project, timeout=1800)
        started = engine.run([*up, "up", "-d", "--no-color"], cwd=project, timeout=600, check=False)
        if started.returncode != 0:
            logs = engine.run([*up, "logs", "--no-color"], cwd=project, check=False).stdout
            raise AssertionError(f"up -d exited {started.returncode}: {started.stderr[-2000:]}\n{logs[-6000:]}")
        wait_for_owners(0)
        results = {c: request(c) for c in ("alice", "bob", "carol")}
        for consumer, result in results.items():
            if result.returncode != 0:
                logs = engine.run([*up, "logs", "--no-color"], cwd=project, check=False).stdout
                owner = engine.run(
                    [
                        *up,
                        "exec",
                        "-T",
                        "owner-1",
                        "sh",
                        "-c",
                        "for f in /tmp/sessions/sessions/*/owners.log; do tail -n 40 $f; done",
                    ],
                    cwd=project,
                    check=False,
                )
                curator = engine.run(
                    [*up, "exec", "-T", "server", "sh", "-c", "tail -n 30 /state/sessions/*/curator.log"],
                    cwd=project,
                    check=False,
                )
                consumer_logs = "".join(
                    f.read_text()[-3000:] for f in (project / "runs").glob(f"{consumer}-*/consumer.log")
                )
                raise AssertionError(
                    f"{consumer}: {result.stderr[-2000:]}\nconsumer.log: "
                    f"{consumer_logs}\n{logs[-2000:]}\n{owner.stdout[-1000:]}"
                    f"{owner.stderr[-1000:]}\n{curator.stdout[-4000:]}"
                )
        reports = {c: json.loads(next((project / "runs").glob(f"{c}-*/report.json")).read_text()) for c in results}
        for consumer, report in reports.items():
            assert report["status"] == "completed" and report["driver"] == "market"
            assert report["lifetime"]["consumer"] == consumer
            assert (
                len({p["host"] for p in report["parties"] if p["id"] != "consumer"}) == 5
            )  # server's curator + 4 owners
        assert sorted(len(r["lifetime"]["declined"]) for r in reports.values()) == [0, 1, 1]  # owner-3: eps 0.5
        lines = len(engine.run([*up, "logs", "--no-color", "server"], cwd=project, check=False).stdout.splitlines())
        engine.run([*up, "restart"], cwd=project, timeout=600)
        wait_for_owners(lines)
        again = request("alice")
        assert again.returncode == 0, again.stderr[-3000:]
        shown = engine.run(
            [*up, "exec", "-T", "owner-1", "marketplace", "ledger", "show", "/kit/owner-1.ledger.sqlite", "--json"],
            cwd=project,
            check=False,
        )
        assert shown.returncode == 0, shown.stderr
        ledger = json.loads(shown.stdout)
        assert [r["state"] for r in ledger["history"]] == ["committed"] * 4  # three before the restart, one after
        containers = inspect_containers(engine, name)
        for owner in MARKET_OWNERS:  # each owner's kit and ledger on a volume of its own
            assert [m["Name"].removeprefix(f"{name}_") for m in containers[owner] if m["Destination"] == "/kit"] == [
                owner
            ]
    finally:
        engine.run([*up, "--profile", "request", "down", "--volumes"], cwd=project, timeout=600, check=False)


@pytest.mark.timeout(1800)
def test_compose_serves_the_parties_own_csv_files_each_mounted_where_its_party_is(engine, host_folder):
    """docker-compose.own.yml with the files `marketplace shares` writes: every owner container
    mounts its own CSV only, the consumer its own target and test set, the server no data at all;
    two requests complete, each owner's ledger charges both, and the server's files hold no row."""
    compose = compose_command()
    project = project_owned_by(HOST_UID, host_folder)  # as the first test's: its image build is reused whole
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "shares",
            str(ROOT / "scenarios" / "sketch-quickstart.yaml"),
            "--out",
            str(project / "own-data"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    for path in (project / "own-data").iterdir():
        os.chmod(path, 0o644)  # the containers' user (uid 1000) reads them
    os.chmod(project / "own-data", 0o755)
    name = f"mktown{os.getpid()}"
    up = [
        *compose,
        "--project-name",
        name,
        "--project-directory",
        str(project),
        "-f",
        str(project / "docker-compose.own.yml"),
    ]
    ensure_base_image(engine)
    try:
        engine.run([*up, "build", "server"], cwd=project, timeout=1800)
        started = engine.run([*up, "up", "-d", "--no-color"], cwd=project, timeout=600, check=False)
        if started.returncode != 0:
            logs = engine.run([*up, "logs", "--no-color"], cwd=project, check=False).stdout
            raise AssertionError(f"up -d exited {started.returncode}: {started.stderr[-2000:]}\n{logs[-6000:]}")
        deadline = time.monotonic() + 300
        while True:
            logs = engine.run([*up, "logs", "--no-color", "server"], cwd=project, check=False).stdout
            if sum(f"owner {o} present" in logs for o in MARKET_OWNERS) == 4:
                break
            assert time.monotonic() < deadline, "the owners did not join:\n" + logs[-3000:]
            time.sleep(1.0)
        assert "this server holds no party's rows" in logs
        for i in range(2):
            done = engine.run(
                [
                    *up,
                    "run",
                    "--rm",
                    "-T",
                    "consumer",
                    "/scenario/sketch-quickstart.yaml",
                    "--set",
                    "sketch.epsilon=0.4",
                    "--set",
                    "sketch.samples=2000",
                    "--quiet",
                    "--out",
                    f"runs/own-{i}",
                ],
                cwd=project,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, (
                done.stderr[-3000:],
                engine.run([*up, "logs", "--no-color"], cwd=project, check=False).stdout[-4000:],
            )
            report = json.loads((project / "runs" / f"own-{i}" / "report.json").read_text())
            assert report["status"] == "completed" and report["deployment"]["data"] == "own"
        shown = engine.run(
            [*up, "exec", "-T", "owner-2", "marketplace", "ledger", "show", "/kit/owner-2.ledger.sqlite", "--json"],
            cwd=project,
            check=False,
        )
        assert [r["state"] for r in json.loads(shown.stdout)["history"]] == ["committed"] * 2
        containers = inspect_containers(engine, name)
        own = {
            party: sorted(m["Source"] for m in mounts if m["Type"] == "bind")
            for party, mounts in containers.items()
            if not party.endswith(":networks")
        }
        for owner in MARKET_OWNERS:  # each owner's container sees its own file, and nothing of the others'
            assert own[owner] == [str(project / "own-data" / f"{owner}.csv")]
        assert own["server"] == []
        state = engine.run(
            [*up, "exec", "-T", "server", "sh", "-c", "cat $(find /state -type f -name '*.json')"],
            cwd=project,
            check=False,
        ).stdout
        first_row = (project / "own-data" / "owner-1.csv").read_text().splitlines()[1].split(",")[0]
        assert state and first_row not in state
    finally:
        engine.run([*up, "--profile", "request", "down", "--volumes"], cwd=project, timeout=600, check=False)
