"""docker-compose.run.yml (one scenario, one run), emulated: the fast path (the real engine is
tests/deploy/test_compose_engine.py).

Each service's command runs as a local process with the service's environment, its volumes mapped
to local folders (one folder per named volume) and the service host names mapped to 127.0.0.1, in
the order the file's depends_on and healthcheck give. The commands run exactly as the file writes
them, so a change that breaks one fails this test.

A container's user is emulated for file access: when the test runs as root, every file a service
will read through its volumes is opened by a child process that dropped to the service's uid (the
image's 1000 unless the service sets `user`), and every writable volume is written to. That is how
keys the container user cannot read (the bug of secret files made by a host user whose uid is not
1000) fail here too. The host's ./scenarios is owned by another uid and private to it, as a host
user with umask 077 would have it, and the report must come back owned by that user.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

COMPOSE = ROOT / "docker-compose.run.yml"
IMAGE_UID = 1000  # the Dockerfile's `useradd --uid 1000 market`
HOST_UID = 4242
PARTIES = ["curator", "owner-1", "owner-2", "owner-3", "owner-4", "consumer"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's variable substitution: ${VAR}, ${VAR:-default}."""
    return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)


class Emulator:
    """Turns a compose service into a local command line, environment and set of mounts."""

    def __init__(self, compose: dict, folder: Path, port: int, binds: dict[str, Path] | None = None) -> None:
        self.services = compose["services"]
        self.folder = folder
        self.binds = binds or {}  # compose source ("./scenarios") -> local folder
        self.port = port
        self.bin = folder / "bin"  # `marketplace` on PATH, as in the image, running this checkout
        self.bin.mkdir(parents=True, exist_ok=True)
        shim = self.bin / "marketplace"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m marketplace "$@"\n')
        shim.chmod(0o755)

    def mounts(self, name: str) -> dict[str, tuple[str, bool]]:
        """Container path -> (local folder, writable)."""
        out = {}
        for volume in self.services[name].get("volumes", []):
            source, target, *mode = volume.split(":")
            if source.startswith("."):
                local = self.binds.get(source, (COMPOSE.parent / source).resolve())
            else:
                local = self.folder / "volumes" / source
            Path(local).mkdir(parents=True, exist_ok=True)
            out[target] = (str(local), mode != ["ro"])
            link = self.rootfs(name) / target.lstrip("/")  # the container's view: a mount inside a folder
            if not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(local, target_is_directory=True)
        return out

    def rootfs(self, name: str) -> Path:
        return self.folder / "rootfs" / name

    def _text(self, value: str, mounts: dict[str, tuple[str, bool]], name: str) -> str:
        value = interpolate(value, os.environ)
        for service in self.services:
            value = value.replace(f"//{service}:", "//127.0.0.1:")
        value = value.replace("//0.0.0.0:", "//127.0.0.1:").replace(":5555", f":{self.port}")
        for container, (local, _) in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if value == container or value.startswith(container + "/"):
                return local + value[len(container) :]
        if value.startswith("/") and any(target.startswith(value.rstrip("/") + "/") for target in mounts):
            return f"{self.rootfs(name)}{value}"  # a folder holding mounts, as the container sees it
        return value

    def command(self, name: str, argv: list[str] | None = None) -> list[str]:
        mounts = self.mounts(name)
        argv = list(argv if argv is not None else self.services[name]["command"])
        if argv[0] == "CMD":
            argv = argv[1:]
        assert argv[0] in ("marketplace", "sh"), (
            f"{name}: the image runs `marketplace ...` or a kit's start.sh, got {argv[0]!r}"
        )
        return [argv[0], *(self._text(a, mounts, name) for a in argv[1:])]

    def env(self, name: str) -> dict[str, str]:
        mounts = self.mounts(name)
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), PATH=f"{self.bin}:{os.environ['PATH']}")
        for key, value in (self.services[name].get("environment") or {}).items():
            env[key] = self._text(str(value), mounts, name)
        return env

    def uid(self, name: str) -> int:
        user = str(self.services[name].get("user", IMAGE_UID))
        return int(user.split(":")[0])

    def access_problems(self, name: str) -> list[str]:
        """What the service's user could not read (or write, on a writable volume) through its mounts."""
        if os.geteuid() != 0 or self.uid(name) == 0:
            return []
        problems = []
        for target, (local, writable) in self.mounts(name).items():
            problems += [f"{target}{p}" for p in access_as(self.uid(name), Path(local), writable)]
        return problems


def access_as(uid: int, root: Path, writable: bool) -> list[str]:
    """Open every file under ``root`` as ``uid``, as a container would see that folder mounted:
    a forked child holds the folder open, drops to ``uid`` and walks it from there (so the local
    folders above it, which a container never sees, do not matter)."""
    read_end, write_end = os.pipe()
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        problems: list[str] = []
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            _walk(top, "", problems)
            if writable:
                try:
                    probe = os.open(".write-check", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=top)
                    os.close(probe)
                    os.unlink(".write-check", dir_fd=top)
                except OSError as err:
                    problems.append(f": not writable ({err.strerror})")
        finally:
            os.write(write_end, json.dumps(problems).encode())
            os._exit(0)
    os.close(write_end)
    os.close(top)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data or b"[]")


def _walk(dir_fd: int, prefix: str, problems: list[str]) -> None:  # pragma: no cover (runs in the child)
    try:
        here = os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=dir_fd)
    except OSError as err:
        problems.append(f"{prefix or '/'}: {err.strerror}")
        return
    for entry in os.scandir(here):
        path = f"{prefix}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            _walk(os.open(entry.name, os.O_PATH | os.O_DIRECTORY, dir_fd=here), path, problems)
        else:
            try:
                os.close(os.open(entry.name, os.O_RDONLY, dir_fd=here))
            except OSError as err:
                problems.append(f"{path}: {err.strerror}")


@pytest.fixture
def host_scenarios(tmp_path):
    """./scenarios as a host user of another uid with umask 077 has it (when root can arrange that)."""
    folder = tmp_path / "host" / "scenarios"
    shutil.copytree(ROOT / "scenarios", folder)
    if os.geteuid() == 0:
        for path in [folder.parent, folder, *folder.rglob("*")]:
            os.chown(path, HOST_UID, HOST_UID)
            os.chmod(path, 0o700 if path.is_dir() else 0o600)
    return folder


def run_service(emu: Emulator, name: str, logs: Path) -> subprocess.Popen:
    problems = emu.access_problems(name)
    assert not problems, f"{name} (uid {emu.uid(name)}) cannot use its volumes: {problems}"
    out = open(logs / f"{name}.log", "w")
    return subprocess.Popen(emu.command(name), env=emu.env(name), stdout=out, stderr=subprocess.STDOUT, cwd=logs)


@pytest.mark.slow
def test_the_compose_file_runs_to_a_completed_report(tmp_path, host_scenarios):
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    runs = tmp_path / "host" / "runs"
    emu = Emulator(compose, tmp_path, free_port(), binds={"./scenarios": host_scenarios, "./runs": runs})
    logs = tmp_path / "logs"
    logs.mkdir()

    provision = run_service(emu, "provision", logs)
    assert provision.wait(120) == 0, (logs / "provision.log").read_text()
    assert services["curator"]["depends_on"]["provision"]["condition"] == "service_completed_successfully"
    for party in PARTIES:  # each party's volume holds its own kit, and only its own secret key
        kit = tmp_path / "volumes" / f"kit-{party}"
        assert sorted(p.name for p in kit.glob("*.key_secret")) == [f"{party}.key_secret"]

    procs = {"curator": run_service(emu, "curator", logs)}
    health = services["curator"]["healthcheck"]["test"]
    for _ in range(int(services["curator"]["healthcheck"].get("retries", 30)) * 4):
        assert procs["curator"].poll() is None, (
            "the curator exited before it was healthy: " + (logs / "curator.log").read_text()[-2000:]
        )
        if subprocess.run(emu.command("curator", health), env=emu.env("curator"), capture_output=True).returncode == 0:
            break
        time.sleep(0.25)
    else:
        pytest.fail("the curator never became healthy: " + (logs / "curator.log").read_text()[-2000:])
    waiting_on_health = [
        n
        for n, s in services.items()
        if (s.get("depends_on") or {}).get("curator", {}).get("condition") == "service_healthy"
    ]
    assert sorted(waiting_on_health) == sorted(PARTIES[1:])
    for name in waiting_on_health:
        procs[name] = run_service(emu, name, logs)
    try:
        for name, proc in procs.items():
            assert proc.wait(timeout=240) == 0, f"{name} failed: " + (logs / f"{name}.log").read_text()[-2000:]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    report_step = [
        n
        for n, s in services.items()
        if "service_completed_successfully" in str(s.get("depends_on")) and n != "curator"
    ]
    assert report_step == ["report"]
    result = run_service(emu, "report", logs)
    assert result.wait(240) == 0, (logs / "report.log").read_text()

    report_file = runs / "compose" / "report.json"
    report = json.loads(report_file.read_text())
    assert report["status"] == "completed", report["failures"]
    assert report["transport_security"].startswith("curve")
    assert [p["id"] for p in report["parties"]] == PARTIES
    assert report["messages"]["consistency"]["agree"] and report["checks"]["central_replay"]["matches"]
    if os.geteuid() == 0:  # handed back to the host user, whatever the uid
        assert {p.stat().st_uid for p in (runs, runs / "compose", report_file)} == {HOST_UID}
    for party in PARTIES:
        assert " WARNING " not in (logs / f"{party}.log").read_text(), f"{party}: a healthy run logs no warning"


def test_each_party_mounts_only_its_own_kit_read_only_and_uses_curve():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    for party in PARTIES:
        volumes = services[party]["volumes"]
        assert sorted(volumes) == sorted([f"kit-{party}:/kit:ro", "reports:/reports"]), party
        assert (
            services[party]["command"][:2] == ["sh", "/kit/start.sh"] and "--insecure" not in services[party]["command"]
        )
        assert services[party]["networks"] == ["market"] and "user" not in services[party]
    assert yaml.safe_load(COMPOSE.read_text())["networks"]["market"]["internal"] is True
    for step in ("provision", "report"):
        assert services[step]["network_mode"] == "none"
    assert not any("kit-" in v for v in services["report"]["volumes"]), "the report step sees no key"


@pytest.mark.skipif(os.geteuid() != 0, reason="emulating another uid's file access needs root")
def test_keys_the_container_user_cannot_read_fail_the_emulation(tmp_path):
    """The bug this file once had: secret keys made by a host user whose uid is not 1000."""
    from marketplace.transport.curve import generate_keys

    compose = yaml.safe_load(COMPOSE.read_text())
    compose["services"]["owner-1"]["volumes"] = ["./keys:/kit:ro", "reports:/reports"]
    keys = tmp_path / "keys"
    generate_keys(keys, owners=4)  # as root: 0600, owned by uid 0
    emu = Emulator(compose, tmp_path, free_port(), binds={"./keys": keys})
    problems = emu.access_problems("owner-1")
    assert any("owner-1.key_secret: Permission denied" in p for p in problems), problems


def test_a_broken_command_fails_the_emulation(tmp_path):
    """The emulator runs what the file says: a misspelt option is a failing command."""
    compose = yaml.safe_load(COMPOSE.read_text())
    compose["services"]["report"]["command"] = [*compose["services"]["report"]["command"], "--no-such-option"]
    emu = Emulator(compose, tmp_path, free_port())
    result = subprocess.run(emu.command("report"), env=emu.env("report"), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--no-such-option" in result.stderr
