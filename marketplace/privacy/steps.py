"""What a ledger records: :class:`Step`, ``count`` releases of one mechanism, each (eps, delta)-DP,
rho-zCDP, or a Gaussian mechanism (rho-zCDP, composed exactly); and how steps read in a report and
in a refusal."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from marketplace.privacy.params import fail, nonnegative_int, positive, probability


@dataclass(frozen=True, kw_only=True)
class Step:
    """``count`` releases of one mechanism on a dataset: each (eps, delta)-DP, or rho-zCDP."""

    mechanism: str
    eps: float | None = None
    delta: float = 0.0
    rho: float | None = None
    count: int = 1
    gaussian: bool = False
    """A rho step that is a Gaussian mechanism (mu = sqrt(2 rho)): composed exactly (see :mod:`.gdp`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, str) or not self.mechanism:
            raise fail(
                TypeError if not isinstance(self.mechanism, str) else ValueError,
                "mechanism",
                "Step",
                "a non-empty string",
                self.mechanism,
            )
        if (self.eps is None) == (self.rho is None):
            raise ValueError(
                f"Step {self.mechanism!r}: give exactly one of eps (pure or approximate DP) "
                f"and rho (zCDP). Got eps={self.eps!r}, rho={self.rho!r}."
            )
        set_ = functools.partial(object.__setattr__, self)
        if self.eps is not None:
            set_("eps", positive(self.eps, "eps", "Step"))
            set_("delta", probability(self.delta, "delta", "Step"))
        else:
            set_("rho", positive(self.rho, "rho", "Step"))
            if self.delta != 0:
                raise fail(ValueError, "delta", "Step", "0 for a zCDP step", self.delta)
        if self.gaussian not in (True, False) or (self.gaussian and self.rho is None):
            raise fail(ValueError, "gaussian", "Step", "True only for a rho step (a Gaussian mechanism)", self.gaussian)
        set_("count", nonnegative_int(self.count, "count", "Step"))

    def to_dict(self) -> dict[str, Any]:
        if self.rho is not None:  # a Gaussian step is a rho step (__post_init__)
            if self.gaussian:
                return {
                    "mechanism": self.mechanism,
                    "rho": self.rho,
                    "mu": math.sqrt(2 * self.rho),
                    "count": self.count,
                }
            return {"mechanism": self.mechanism, "rho": self.rho, "count": self.count}
        return {"mechanism": self.mechanism, "eps": self.eps, "delta": self.delta, "count": self.count}

    def eps_delta(self) -> tuple[float, float]:
        """(eps, delta) of an (eps, delta) step; a ValueError for a rho step, which states no eps."""
        if self.eps is None:
            raise ValueError(f"Step {self.mechanism!r} is a zCDP step (rho={self.rho!r}): it states no eps.")
        return self.eps, self.delta


def merged_steps(steps: Iterable[Step]) -> list[dict[str, Any]]:
    """Step dicts with the counts of identical steps (same mechanism and cost) added up, in order."""
    merged: dict[tuple, dict[str, Any]] = {}
    for step in steps:
        entry = step.to_dict()
        key = tuple((name, value) for name, value in entry.items() if name != "count")
        if key in merged:
            merged[key]["count"] += step.count
        else:
            merged[key] = entry
    return list(merged.values())


def describe_step(step: Step) -> str:
    """``1656 x mwem (eps=0.01)``: a step in a refusal's words."""
    cost = (
        f"rho={step.rho:g}"
        if step.rho is not None
        else f"eps={step.eps:g}" + (f", delta={step.delta:g}" if step.delta else "")
    )
    return f"{step.count} x {step.mechanism} ({cost})"
