"""docker-compose.yml, emulated: no Docker engine runs here, so each service's command is started
as a local process with the service's environment, its volumes mapped to local folders and the
service host names mapped to 127.0.0.1, in the order the file's depends_on and healthcheck give.
The run must complete and the report step must write a completed report. The commands run exactly
as the file writes them, so a change that breaks one fails this test."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from marketplace.transport.curve import generate_keys

COMPOSE = ROOT / "docker-compose.yml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Emulator:
    """Turns a compose service into a local command line and environment."""

    def __init__(self, compose: dict, host_dirs: dict[str, Path], port: int) -> None:
        self.services = compose["services"]
        self.host_dirs = host_dirs  # compose source ("./keys") -> local folder
        self.port = port

    def _text(self, value: str, mounts: dict[str, str]) -> str:
        for service in self.services:
            value = value.replace(f"//{service}:", "//127.0.0.1:")
        value = value.replace("//0.0.0.0:", "//127.0.0.1:").replace(":5555", f":{self.port}")
        for container, host in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
            if value == container or value.startswith(container + "/"):
                value = host + value[len(container):]
        return value

    def mounts(self, name: str) -> dict[str, str]:
        out = {}
        for volume in self.services[name].get("volumes", []):
            source, target = volume.split(":")[:2]
            out[target] = str(self.host_dirs.get(source, (COMPOSE.parent / source).resolve()))
        return out

    def command(self, name: str, argv: list[str] | None = None) -> list[str]:
        mounts = self.mounts(name)
        argv = list(argv if argv is not None else self.services[name]["command"])
        if argv[0] == "CMD":
            argv = argv[1:]
        assert argv[0] == "marketplace", f"{name}: the image runs `marketplace ...`, got {argv[0]!r}"
        return [sys.executable, "-m", "marketplace", *(self._text(a, mounts) for a in argv[1:])]

    def env(self, name: str) -> dict[str, str]:
        mounts = self.mounts(name)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for key, value in (self.services[name].get("environment") or {}).items():
            env[key] = self._text(str(value), mounts)
        return env


@pytest.mark.slow
def test_the_compose_file_runs_to_a_completed_report(tmp_path):
    compose = yaml.safe_load(COMPOSE.read_text())
    keys, runs = tmp_path / "keys", tmp_path / "runs"
    generate_keys(keys, owners=4)  # what `marketplace keys generate keys --owners 4` makes for ./keys
    emu = Emulator(compose, {"./keys": keys, "./runs/compose": runs}, free_port())
    services = compose["services"]
    logs = {}

    def start(name: str) -> subprocess.Popen:
        logs[name] = open(tmp_path / f"{name}.log", "w")
        return subprocess.Popen(emu.command(name), env=emu.env(name), stdout=logs[name], stderr=subprocess.STDOUT, cwd=tmp_path)

    procs = {"curator": start("curator")}
    health = services["curator"]["healthcheck"]["test"]
    for _ in range(int(services["curator"]["healthcheck"].get("retries", 30)) * 4):
        if procs["curator"].poll() is not None:
            pytest.fail("the curator exited before it was healthy: " + (tmp_path / "curator.log").read_text()[-2000:])
        if subprocess.run(emu.command("curator", health), env=emu.env("curator"), capture_output=True).returncode == 0:
            break
        time.sleep(0.25)
    else:
        pytest.fail("the curator never became healthy: " + (tmp_path / "curator.log").read_text()[-2000:])
    waiting_on_health = [n for n, s in services.items() if (s.get("depends_on") or {}).get("curator", {}).get("condition") == "service_healthy"]
    assert sorted(waiting_on_health) == ["consumer", "owner-1", "owner-2", "owner-3", "owner-4"]
    for name in waiting_on_health:
        procs[name] = start(name)
    try:
        for name, proc in procs.items():
            assert proc.wait(timeout=240) == 0, f"{name} failed: " + (tmp_path / f"{name}.log").read_text()[-2000:]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    report_step = [n for n, s in services.items() if "service_completed_successfully" in str(s.get("depends_on"))]
    assert report_step == ["report"]
    result = subprocess.run(emu.command("report"), env=emu.env("report"), capture_output=True, text=True, cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((runs / "report.json").read_text())
    assert report["status"] == "completed", report["failures"]
    assert report["transport_security"].startswith("curve")
    assert [p["id"] for p in report["parties"]] == ["curator", "owner-1", "owner-2", "owner-3", "owner-4", "consumer"]
    assert report["messages"]["consistency"]["agree"] and report["checks"]["central_replay"]["matches"]


def test_every_party_service_mounts_the_scenario_and_keys_read_only():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    for name, service in services.items():
        if name == "report":
            continue
        volumes = service.get("volumes", [])
        assert any(v.endswith(":/scenario:ro") for v in volumes), name
        assert any(v.endswith(":/keys:ro") for v in volumes), name
        assert "--keys" in service["command"] and "--insecure" not in service["command"], f"{name}: CURVE must be on"


def test_a_broken_command_fails_the_emulation(tmp_path):
    """The emulator runs what the file says: a misspelt option is a failing command."""
    compose = yaml.safe_load(COMPOSE.read_text())
    compose["services"]["owner-1"]["command"] = [*compose["services"]["owner-1"]["command"], "--no-such-option"]
    emu = Emulator(compose, {"./keys": tmp_path, "./runs/compose": tmp_path}, free_port())
    result = subprocess.run(emu.command("owner-1"), env=emu.env("owner-1"), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--no-such-option" in result.stderr
