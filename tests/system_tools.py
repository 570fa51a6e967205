"""System tools that some tests need (a Docker engine, mmdebstrap, iproute2, kubectl), and the one
way such a test says that one is missing: it skips, naming every missing tool and the command that
installs it, whichever of its tools is missing. It never fails for a tool the machine lacks."""

from __future__ import annotations

import shutil

import pytest

INSTALL = {
    "docker": "apt-get install docker.io",
    "dockerd": "apt-get install docker.io",
    "docker-compose": "apt-get install docker-compose",
    "mmdebstrap": "apt-get install mmdebstrap",
    "ip": "apt-get install iproute2",
    "ss": "apt-get install iproute2",
    "kubectl": "apt-get install kubernetes-client",
    "setpriv": "apt-get install util-linux",
}
"""Tool -> the Debian command that installs it (``.ci/run`` installs them all as root)."""


def missing_tools(*tools: str) -> str | None:
    """None when every one of ``tools`` is on PATH; else a sentence naming each missing one and how
    to install it, for a skip reason."""
    absent = [tool for tool in tools if shutil.which(tool) is None]
    if not absent:
        return None
    how = "; ".join(f"{tool}: {INSTALL.get(tool, 'install it')}" for tool in absent)
    return f"needs {', '.join(absent)}, not on PATH (Debian: {how}; .ci/run installs them)"


def skip_unless_tools(*tools: str, why: str = "") -> None:
    """Skip the calling test, naming the missing tools and how to install them, unless all are on PATH."""
    reason = missing_tools(*tools)
    if reason is not None:
        pytest.skip(f"{why}: {reason}" if why else reason)
