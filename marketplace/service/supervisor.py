"""The owner agents ``marketplace serve`` starts for its owners, and keeps running.

Each agent is a process hosting a block of owners (:mod:`.agent`). An agent that exits while the
marketplace serves (a crash, a kill, the OOM killer) is started again, at most every
:data:`RESTART_S` seconds so that an agent that cannot start does not become a busy loop. Its owners'
connections, keys and ledgers are where they were: they rejoin the next sessions; the sessions they
were in when it died went on without them.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from marketplace.runtime import party_command

log = logging.getLogger("marketplace.serve")

RESTART_S = 5.0
"""The least time between two starts of one agent (a crash loop is not a busy loop)."""


@dataclass
class _Agent:
    ids: list[str]
    proc: subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0


class AgentSupervisor:
    """The agents of a served marketplace kept in ``state`` (module docstring). ``owner_data``: a
    folder of ``<owner>.csv`` files the agents give their owners (a schema-only marketplace)."""

    def __init__(self, state: Path, *, owner_data: Path | None = None) -> None:
        self.state = state
        self.owner_data = owner_data
        self.agents: list[_Agent] = []
        self.market = ""

    def start(self, owners: list[str], market: str, owners_per_process: int | None) -> None:
        """Start agents for ``owners`` (``owners_per_process`` each; default: two agents), connecting to ``market``."""
        self.market = market
        per = owners_per_process or max(1, -(-len(owners) // max(1, min(2, os.cpu_count() or 1))))
        for first in range(0, len(owners), per):
            agent = _Agent(owners[first : first + per])
            self.agents.append(agent)
            self._spawn(agent)

    def _spawn(self, agent: _Agent) -> None:
        ids = agent.ids
        label = f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else ids[0]
        work = self.state / "agents" / label
        work.mkdir(parents=True, exist_ok=True, mode=0o700)
        own = self.owner_data is not None
        with open(work / "agent.log", "a") as log_file:
            agent.proc = subprocess.Popen(
                party_command(
                    "agent",
                    market=self.market,
                    keys=self.state / "owners",
                    ids=",".join(ids),
                    work=work,
                    exit_with=os.getpid(),
                    data=self.owner_data,
                    schema=self.state / "market.yaml" if own else None,
                ),
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        agent.started = time.monotonic()

    def supervise(self, stopping: Callable[[], bool] = lambda: False) -> None:
        """Start again every agent that has exited (at most every :data:`RESTART_S`), unless the
        marketplace is ``stopping``: asked again after the agent was seen gone, since a signal to the
        whole process group (``timeout``, systemd) ends the agents at the moment it stops the server,
        and an agent that left because of it must stay gone."""
        for agent in self.agents:
            proc = agent.proc
            if proc is None or proc.poll() is None or time.monotonic() - agent.started < RESTART_S:
                continue
            if stopping():
                return
            agent.restarts += 1
            log.warning(
                "the agent of %s exited (status %s): starting it again (restart %d)",
                ",".join(agent.ids),
                proc.returncode,
                agent.restarts,
            )
            try:
                self._spawn(agent)
            except OSError as err:
                log.error("the agent of %s could not be started again: %s", ",".join(agent.ids), err)

    def alive(self) -> bool:
        """Whether any agent still runs."""
        return any(a.proc is not None and a.proc.poll() is None for a in self.agents)

    def restarts(self) -> int:
        return sum(a.restarts for a in self.agents)

    def end_all(self, grace_s: float) -> None:
        """Let every agent end within ``grace_s`` (one deadline for all of them, not one each); then
        terminate it, then kill it."""
        deadline = time.monotonic() + grace_s
        for agent in self.agents:
            if agent.proc is not None:
                _end(agent.proc, max(0.0, deadline - time.monotonic()))


def _end(proc: subprocess.Popen, grace_s: float) -> None:
    try:
        proc.wait(timeout=grace_s)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.terminate()
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
