"""What a run of ``sketch`` releases about each party's data, declared once: its release plan.

Each owner releases one sketch (:mod:`.release`): the sum of its records' features with Laplace noise
calibrated to the feature map's L1 sensitivity (or Gaussian noise to its L2 sensitivity, for
``sketch.mechanism: gaussian``), at eps_num = ``numerator_share`` * eps, and its row count with
Laplace noise at the rest of eps (sensitivity 1), both under add/remove-one of a row, composed by
basic composition on the owner's own ledger, within ``sketch.budget_epsilon`` (and
``sketch.budget_delta``). The curator merges the sketch and sends it on to the consumer, so both
receive it. The consumer releases nothing derived from data of its own.

Everything that needs a release's eps reads it from here: the budget check before a run, the
owner's lifetime charge, the owner's ledger entries and the noise the owner draws
(:func:`marketplace.protocols.sketch.release.noisy_sketch`), as does the library's
:func:`~marketplace.protocols.sketch.release.private_sketch` (:func:`sketch_releases`).
"""

from __future__ import annotations

from typing import Any

from marketplace.privacy.neighbouring import add_remove_one
from marketplace.privacy.plan import Account, Release, ReleasePlan
from marketplace.roles import CONSUMER, CURATOR

ACCOUNT = "owner"
"""The owner's one ledger (named after the owner in a report)."""
COUNT = "laplace count"
"""The release of the noisy row count, by the name its ledger records."""
BUDGET_KEYS = ("sketch.budget_epsilon", "sketch.budget_delta")
UNBOUNDED = "sketch.epsilon is null: the owner's exact, noise-free sketch would leave"


def sum_release(mechanism: str) -> str:
    """The name the ledger records for the noisy sum of features under ``mechanism``."""
    return f"{mechanism} sum of features"


def sketch_releases(
    *,
    epsilon: float,
    mechanism: str,
    delta: float | None,
    numerator_share: float,
    l1_sensitivity: float,
    l2_sensitivity: float,
    account: str = ACCOUNT,
    to: tuple[str, ...] = (CURATOR, CONSUMER),
) -> tuple[Release, Release]:
    """The two releases of one sketch at total budget ``epsilon`` (and ``delta``, all of it on a
    Gaussian sum): the sum of features at eps_num = ``numerator_share`` * ``epsilon``, calibrated to
    the map's L1 (Laplace) or L2 (Gaussian) sensitivity, and the Laplace count at ``epsilon`` - eps_num."""
    gaussian = mechanism == "gaussian"
    eps_num = numerator_share * epsilon
    total = Release(
        name=sum_release(mechanism),
        account=account,
        to=to,
        mechanism=mechanism,
        sensitivity=l2_sensitivity if gaussian else l1_sensitivity,
        norm="L2" if gaussian else "L1",
        eps=eps_num,
        delta=float(delta or 0.0) if gaussian else 0.0,
    )
    count = Release(name=COUNT, account=account, to=to, mechanism="laplace", sensitivity=1.0, eps=epsilon - eps_num)
    return total, count


_SENSITIVITIES: dict[tuple[Any, ...], tuple[float, float]] = {}
"""Memo of the public map's (L1, L2) sensitivities per map settings: a run's owners share one map,
and the plan of each is built (at least) once before the run starts."""


def _sensitivities(config: Any) -> tuple[float, float]:
    from marketplace.protocols.sketch.public import public_map, record_dim

    key = (repr(config.sketch.map), record_dim(config), config.seed)
    if key not in _SENSITIVITIES:
        fmap = public_map(config)
        if len(_SENSITIVITIES) >= 64:
            _SENSITIVITIES.clear()
        _SENSITIVITIES[key] = (float(fmap.l1_sensitivity), float(fmap.l2_sensitivity))
    return _SENSITIVITIES[key]


def release_plan(config: Any, party: str) -> ReleasePlan:
    """The releases of ``party``'s data in a run of ``config``: an owner's one sketch (two releases on
    its ledger), or an unbounded release when ``sketch.epsilon`` is null (the exact sketch leaves);
    nothing for the consumer."""
    if party == CONSUMER:
        return ReleasePlan(
            party=party, what=f"sketch: nothing of the consumer's ({config.name})", relation="add/remove-one"
        )
    s = config.sketch
    owner = Account(
        name=ACCOUNT,
        dataset=party,
        neighbouring=add_remove_one(f"a row of {party}'s data"),
        theorem="basic",
        budget=(s.budget_epsilon, s.budget_delta) if s.budget_epsilon is not None else None,
        budget_keys=BUDGET_KEYS,
    )
    what = f"sketch: one sketch of {party}'s rows ({config.name})"
    if s.epsilon is None:
        return ReleasePlan(party=party, what=what, relation="add/remove-one", accounts=(owner,), unbounded=UNBOUNDED)
    l1, l2 = _sensitivities(config)
    releases = sketch_releases(
        epsilon=s.epsilon,
        mechanism=s.mechanism,
        delta=s.delta,
        numerator_share=s.numerator_share,
        l1_sensitivity=l1,
        l2_sensitivity=l2,
    )
    return ReleasePlan(party=party, what=what, relation="add/remove-one", accounts=(owner,), releases=releases)
