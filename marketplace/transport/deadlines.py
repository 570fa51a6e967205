"""Progress deadlines that grow with the work a step declares.

``transport.progress_timeout_s`` is the time a party gets to deliver what a role waits for, for a
step of reference size. A role may declare that one of its steps is larger (:meth:`Role.progress_scale`:
a pfds agent that must read and vote with 100 sharers' trees, where the reference step has 10): the
party then gets ``progress_timeout_s`` times that scale, never more than ``run_timeout_s``. The scale
comes from the scenario (how many releases the protocol sends each party), never from the party
that is waited for, so an owner cannot buy itself more time, and one that never answers is still
dropped, only later.
"""

from __future__ import annotations

import math


def step_deadline(base_s: float, scale: float, cap_s: float) -> float:
    """Seconds a party gets for a step ``scale`` times the reference one: ``base_s * scale``, at
    least ``base_s`` and at most ``cap_s`` (or ``base_s``, if that is larger). Raises ValueError,
    naming the argument, for a base or cap that is not a positive finite number or a scale that is
    not a finite number of at least 1."""
    for name, value in (("base_s", base_s), ("cap_s", cap_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"step_deadline: {name} must be a positive finite number of seconds, got {value!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale < 1:
        raise ValueError(f"step_deadline: scale must be a finite number of at least 1, got {scale!r}")
    return min(base_s * scale, max(base_s, cap_s))


def missed_text(what: str, base_s: float, scale: float, limit_s: float) -> str:
    """The reason a party is dropped for missing its deadline, with the scale when there was one."""
    if scale == 1:
        return f"no {what} within progress_timeout_s={base_s:g}"
    return f"no {what} within {limit_s:g} s (progress_timeout_s={base_s:g} x {scale:g} for this step's declared work)"
