"""The availability tests' harness: a run whose parties are started one by one, as by hand (each
`marketplace curator|owner|consumer` its own process, or a hostile owner from
``tests/hostile_party.py``), plus attackers that connect to the curator from the test process.

Everything stays on loopback, every wait is bounded, and every process dies with the test.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import yaml
import zmq
from conftest import ROOT

from marketplace.transport.context import new_context
from marketplace.transport.curve import CurveKeys, generate_keys

HEARTBEAT_INTERVAL_S = 0.2
HEARTBEAT_TIMEOUT_S = 2.0
PROGRESS_TIMEOUT_S = 4.0


def _die_with_test() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def hostile_scenario(raw: dict, *, rounds: int, rows_per_component: int = 300, owners: int = 3) -> dict:
    """The tiny scenario, longer, with short heartbeats and progress deadlines."""
    raw["data"]["source"]["covariate_shift"]["rows_per_component"] = rows_per_component
    raw["parties"]["owners"] = owners
    raw["summarize"]["rounds"] = rounds
    raw["transport"].update(
        heartbeat_interval_s=HEARTBEAT_INTERVAL_S,
        heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S,
        progress_timeout_s=PROGRESS_TIMEOUT_S,
        start_timeout_s=30.0,
        run_timeout_s=300.0,
    )
    return raw


class LocalRun:
    """One run's parties as separate processes on 127.0.0.1, started one at a time."""

    def __init__(self, folder: Path, raw: dict, *, curve: bool = True, run_id: str = "hostile") -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.scenario = folder / "scenario.yaml"
        self.scenario.write_text(yaml.safe_dump(raw))
        self.owners = raw["parties"]["owners"]
        self.curve = curve
        self.run_id = run_id
        self.keys = folder / "keys"
        if curve:
            generate_keys(self.keys, owners=self.owners)
        self.procs: dict[str, subprocess.Popen] = {}
        self.started = time.monotonic()
        self.endpoint_file = folder / "curator.endpoint"

    def _security(self) -> list[str]:
        return ["--keys", str(self.keys)] if self.curve else ["--insecure"]

    def _start(self, party: str, cmd: list[str]) -> subprocess.Popen:
        log = (self.folder / "logs").joinpath(f"{party}.log")
        log.parent.mkdir(exist_ok=True)
        with log.open("wb") as out:
            proc = subprocess.Popen(
                cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_test
            )
        self.procs[party] = proc
        return proc

    def report_path(self, party: str) -> Path:
        return self.folder / "parties" / f"{party}.json"

    def curator(self) -> str:
        self._start(
            "curator",
            [
                sys.executable,
                "-m",
                "marketplace",
                "curator",
                "--scenario",
                str(self.scenario),
                "--endpoint",
                "tcp://127.0.0.1:0",
                "--endpoint-file",
                str(self.endpoint_file),
                "--report",
                str(self.report_path("curator")),
                "--run-id",
                self.run_id,
                *self._security(),
            ],
        )
        deadline = time.monotonic() + 60
        while not self.endpoint_file.exists():
            if time.monotonic() > deadline or self.procs["curator"].poll() is not None:
                raise AssertionError(f"the curator did not bind: {self.log('curator')[-500:]}")
            time.sleep(0.02)
        return self.endpoint_file.read_text().strip()

    @property
    def endpoint(self) -> str:
        return self.endpoint_file.read_text().strip()

    def party(self, party: str, *, hostile: str | None = None, args: tuple[str, ...] = ()) -> subprocess.Popen:
        common = [
            "--scenario",
            str(self.scenario),
            "--endpoint",
            self.endpoint,
            "--report",
            str(self.report_path(party)),
            "--run-id",
            self.run_id,
            *self._security(),
            *args,
        ]
        if hostile is not None:
            return self._start(
                party, [sys.executable, str(ROOT / "tests" / "hostile_party.py"), hostile, "--id", party, *common]
            )
        role = "consumer" if party == "consumer" else "owner"
        return self._start(
            party, [sys.executable, "-m", "marketplace", role, *(["--id", party] if role == "owner" else []), *common]
        )

    def everyone(
        self,
        *,
        hostile: dict[str, str] | None = None,
        skip: tuple[str, ...] = (),
        args: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        """Start the curator (if not yet) and every other party not in ``skip``."""
        if "curator" not in self.procs:
            self.curator()
        for i in range(1, self.owners + 1):
            owner = f"owner-{i}"
            if owner not in skip:
                self.party(owner, hostile=(hostile or {}).get(owner), args=(args or {}).get(owner, ()))
        if "consumer" not in skip:
            self.party("consumer", args=(args or {}).get("consumer", ()))

    def wait(self, timeout_s: float = 120) -> dict[str, int | None]:
        """Wait for every party; kill what is left after ``timeout_s``. Exit codes by party."""
        deadline = time.monotonic() + timeout_s
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.wall_s = time.monotonic() - self.started
        return {party: proc.returncode for party, proc in self.procs.items()}

    def kill(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def log(self, party: str) -> str:
        path = self.folder / "logs" / f"{party}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait_for_log(self, party: str, text: str, timeout_s: float = 60) -> None:
        """Wait (at most ``timeout_s``) until ``party``'s log shows ``text``."""
        deadline = time.monotonic() + timeout_s
        while text not in self.log(party) and time.monotonic() < deadline:
            time.sleep(0.02)

    def curator_report(self) -> dict:
        return json.loads(self.report_path("curator").read_text())

    def assemble(self) -> dict:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "marketplace",
                "assemble",
                str(self.folder / "parties"),
                "--scenario",
                str(self.scenario),
                "--out",
                str(self.folder / "report"),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if out.returncode not in (0, 3):
            raise AssertionError(f"assemble failed ({out.returncode}): {out.stderr[-2000:]}")
        return json.loads((self.folder / "report" / "report.json").read_text())


def rss_kib(pid: int, field: str = "VmRSS", *, missing_ok: bool = False) -> int | None:
    """A process's resident memory (VmRSS) or its peak (VmHWM), in KiB. A process that has exited
    (a zombie has no memory lines, a reaped one no /proc entry) raises, or with ``missing_ok``
    gives None."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        if line.startswith(field + ":"):
            return int(line.split()[1])
    if missing_ok:
        return None
    raise AssertionError(f"no {field} for pid {pid}")


class Attacker:
    """A socket that floods the curator from a thread of the test process, until stopped."""

    def __init__(
        self, endpoint: str, *, identity: bytes | None = None, keys: CurveKeys | None = None, read: bool = True
    ) -> None:
        self.ctx = new_context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SNDHWM, 100_000)
        if not read:
            self.sock.setsockopt(zmq.RCVHWM, 1)
            self.sock.setsockopt(zmq.RCVBUF, 4096)
        if identity is not None:
            self.sock.setsockopt(zmq.IDENTITY, identity)
        if keys is not None:
            keys.configure_client(self.sock)
        self.sock.connect(endpoint)
        self.read = read
        self.sent = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)
        self.sent += 1

    def flood(self, frames: Callable[[int], bytes], seconds: float) -> Attacker:
        """Send ``frames(i)`` for i = 0, 1, ... as fast as the socket takes them, for ``seconds``."""

        def run() -> None:
            end = time.monotonic() + seconds
            i = 0
            while not self._stop.is_set() and time.monotonic() < end:
                try:
                    self.sock.send(frames(i), zmq.NOBLOCK)
                    self.sent += 1
                    i += 1
                except zmq.Again:
                    time.sleep(0.0005)
                if self.read and i % 64 == 0:
                    while self.sock.poll(0):
                        self.sock.recv()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def join(self) -> int:
        if self._thread is not None:
            self._thread.join(timeout=120)
        return self.sent

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sock.close(0)
        self.ctx.term()


def pid_of(run: LocalRun, party: str) -> int:
    return run.procs[party].pid


def terminate_group(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
