"""A private Docker engine for one test: started as root, its data, state and socket in a temporary
folder, and stopped and removed afterwards. It uses the overlay2 storage driver where the kernel and
the filesystem allow it, else vfs (slower: every layer and every container is a full copy).

With overlay2 and memory to spare, its data (images, layers, containers, volumes: about 0.6 GiB
after the compose tests) lives in a tmpfs of its own, so builds write to memory and stopping the
engine frees it at once: on a busy disk, removing those files one by one took over a minute.

The engine leaves the host's network settings alone: no iptables rules, no IP forwarding or
masquerading, no default bridge. Containers on its networks reach each other, and nothing they send
is forwarded off the machine. Builds use the host's network (``--network host``) to reach the
package index.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from system_tools import missing_tools

MEMORY_DATA_BYTES = 4 << 30
"""The size of the tmpfs that holds an overlay2 engine's data; it is only used where the machine has
twice that available, and only what is stored takes memory."""


class EngineUnavailable(RuntimeError):
    """No Docker engine could be started here; the message says exactly why (the test skips)."""


class DockerEngine:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mkt-engine-", dir="/tmp"))  # short: unix socket paths are limited
        self.socket = self.root / "docker.sock"
        self.env = dict(os.environ, DOCKER_HOST=f"unix://{self.socket}", DOCKER_CONFIG=str(self.root / "client"))
        self.proc: subprocess.Popen | None = None
        self.log = self.root / "dockerd.log"
        self.driver = ""
        self.in_memory = False

    def start(self, timeout_s: float = 60.0) -> None:
        if os.geteuid() != 0:
            raise EngineUnavailable(f"starting a Docker engine needs root; this test runs as uid {os.geteuid()}")
        missing = missing_tools("dockerd", "docker")
        if missing is not None:
            raise EngineUnavailable(missing)
        failures = []
        chosen = os.environ.get("MARKETPLACE_TEST_DOCKER_STORAGE")  # e.g. vfs, to measure the slow path
        for driver in [chosen] if chosen else ["overlay2", "vfs"]:
            try:
                self._start(driver, timeout_s)
                self.driver = driver
                return
            except EngineUnavailable as err:
                failures.append(f"{driver}: {err}")
                self._stop_daemon()
                self.in_memory = False
                self._unmount_below(self.root / "data")
                shutil.rmtree(self.root / "data", ignore_errors=True)
        raise EngineUnavailable("; ".join(failures))

    def _data_in_memory(self) -> bool:
        """Mount a tmpfs as the engine's data root if the machine has memory to spare; whether it did."""
        if available_memory_bytes() < 2 * MEMORY_DATA_BYTES:
            return False
        data = self.root / "data"
        data.mkdir(exist_ok=True)
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={MEMORY_DATA_BYTES},mode=0711", "mkt-engine-data", str(data)],
            capture_output=True,
        )
        return mounted.returncode == 0

    def _start(self, driver: str, timeout_s: float) -> None:
        if driver == "overlay2":  # vfs copies every layer whole: it stays on disk
            self.in_memory = self._data_in_memory()
        command = [
            "dockerd",
            f"--storage-driver={driver}",
            f"--data-root={self.root / 'data'}",
            f"--exec-root={self.root / 'exec'}",
            f"--pidfile={self.root / 'docker.pid'}",
            f"--host=unix://{self.socket}",
            "--bridge=none",
            "--iptables=false",
            "--ip-forward=false",
            "--ip-masq=false",
        ]
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise EngineUnavailable(
                    f"dockerd exited with status {self.proc.returncode} at start: {self.log_tail()}"
                )
            if self.socket.exists():
                info = self.docker("info", "--format", "{{.Driver}}", check=False, timeout=10)
                if info.returncode == 0:
                    if info.stdout.strip() != driver:
                        raise EngineUnavailable(
                            f"dockerd runs the {info.stdout.strip()!r} storage driver, not {driver!r}"
                        )
                    return
            time.sleep(0.5)
        raise EngineUnavailable(f"dockerd did not answer within {timeout_s:g} s: {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def docker(self, *args: str, check: bool = True, timeout: float = 600, **kwargs) -> subprocess.CompletedProcess:
        return self.run(["docker", *args], check=check, timeout=timeout, **kwargs)

    def run(
        self, argv: list[str], *, check: bool = True, timeout: float = 600, **kwargs
    ) -> subprocess.CompletedProcess:
        """A client command against this engine (docker, docker-compose, the stand-in base script)."""
        kwargs.setdefault("env", self.env)
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result

    def stop(self) -> None:
        """Stop the engine (its containers go with it) and remove everything it stored."""
        self._stop_daemon()
        self._unmount_below(self.root)  # leftovers of a killed engine (netns, shm, overlays), and the data's tmpfs
        shutil.rmtree(self.root, ignore_errors=True)

    @staticmethod
    def _unmount_below(folder: Path) -> None:
        """Unmount everything mounted at or below ``folder``, innermost first."""
        mounts = [
            line.split()[1]
            for line in Path("/proc/mounts").read_text().splitlines()
            if len(line.split()) > 1 and (line.split()[1] + "/").startswith(f"{folder}/")
        ]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)

    def _stop_daemon(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def available_memory_bytes() -> int:
    """MemAvailable of /proc/meminfo (0 where it cannot be read)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def compose_command() -> list[str]:
    """The compose client available here: the v2 plugin (`docker compose`) or docker-compose 1.x."""
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise EngineUnavailable(
        "needs the compose v2 plugin (`docker compose`) or docker-compose, neither installed "
        "(Debian: apt-get install docker-compose; .ci/run installs it)"
    )
