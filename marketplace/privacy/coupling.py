"""A coupling of two runs, for the differential test: each release's output recorded in one run and
given back, in the same order, in the other.

Every output of a declared release passes through :meth:`marketplace.privacy.plan.ReleasePlan.released`,
which hands it to :func:`released` here. Outside a test nothing is active and the output is returned
as it is. Under :func:`coupled`, a :class:`Coupling` in ``record`` mode keeps a copy of each output,
by party and release, in order; one in ``replay`` mode returns the kept output instead of the new one.
Run a protocol on a dataset D recording, then on a neighbour D' replaying: every release then has the
same output in both runs (a coupling of the two runs' randomness, legitimate for a test), so
everything computed from releases alone is identical, and whatever a party receives that still
differs reached it from the data by a path no release covers, unless the protocol declares it a
disclosure. Fixing the noise seed instead is weaker: a release's output then differs between D and
D', and hides what is computed from it.

The active coupling is a context variable: the in-process driver runs every party in one thread, so
one coupling covers a whole run.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

__all__ = ["Coupling", "coupled", "released"]

T = TypeVar("T")

_ACTIVE: ContextVar[Coupling | None] = ContextVar("marketplace_release_coupling", default=None)


@dataclass
class Coupling:
    """The outputs of one run's releases (``record``), or those given back to another run (``replay``).

    ``tape`` maps (party, release name) to that release's outputs in order. In replay, ``missing``
    lists each output asked for that the recorded run did not make (the two runs then made different
    releases: itself a difference the test reports), and the new output is returned for it."""

    mode: Literal["record", "replay"]
    tape: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    _next: dict[tuple[str, str], int] = field(default_factory=dict)

    def output(self, party: str, name: str, value: T) -> T:
        key = (party, name)
        if self.mode == "record":
            self.tape.setdefault(key, []).append(copy.deepcopy(value))
            return value
        index = self._next.get(key, 0)
        self._next[key] = index + 1
        recorded = self.tape.get(key, [])
        if index >= len(recorded):
            self.missing.append(f"{party}: release {name!r} #{index + 1} was not made in the recorded run")
            return value
        return copy.deepcopy(recorded[index])

    def replay(self) -> Coupling:
        """A coupling that gives this one's recorded outputs back."""
        return Coupling("replay", self.tape)

    def unused(self) -> list[str]:
        """In replay: the recorded outputs no release asked for (the recorded run made more releases)."""
        return [
            f"{party}: release {name!r} made {len(outputs)} time(s) in the recorded run, "
            f"{self._next.get((party, name), 0)} here"
            for (party, name), outputs in self.tape.items()
            if self._next.get((party, name), 0) < len(outputs)
        ]


@contextmanager
def coupled(coupling: Coupling) -> Iterator[Coupling]:
    """Couple the releases made inside the block through ``coupling``."""
    token = _ACTIVE.set(coupling)
    try:
        yield coupling
    finally:
        _ACTIVE.reset(token)


def released(party: str, name: str, value: T) -> T:
    """``value``, the output of ``party``'s release ``name``: as it is, or as the active coupling
    records or replays it."""
    coupling = _ACTIVE.get()
    return value if coupling is None else coupling.output(party, name, value)
