"""A protocol's release plan: every release of one party's data in a run, declared once.

A protocol states, from a scenario's public settings alone, what a run may release about each
party's data: :class:`ReleasePlan`, one per party. Each :class:`Release` says what it is (the name its
ledger records), who receives it, its mechanism, the sensitivity the mechanism is calibrated to
(from public bounds) and its cost; each :class:`Account` is one ledger: whose data it protects, under
which neighbouring relation, composed by which theorem, within which budget. Everything that needs a
release's cost is read from the plan, so it is written in one place:

* the budget check before a run starts (:meth:`ReleasePlan.check`);
* the party's lifetime charge (:meth:`ReleasePlan.declared`);
* the privacy parameter its mechanism is calibrated with (:meth:`ReleasePlan.release`);
* the ledger entries the party records as it releases (:meth:`ReleasePlan.ledger`,
  :meth:`ReleasePlan.spend`), refused when they pass what the plan declared;
* the output of each release, which leaves the party through :meth:`ReleasePlan.released` (where
  the coupled differential test of :mod:`marketplace.privacy.coupling` records and replays it).

>>> from marketplace.privacy.neighbouring import add_remove_one
>>> plan = ReleasePlan(
...     party="owner-1",
...     what="a sketch of owner-1's rows",
...     relation="add/remove-one",
...     accounts=(Account(name="owner", neighbouring=add_remove_one("a row of owner-1's data")),),
...     releases=(
...         Release(name="laplace sum", account="owner", to=("curator", "consumer"), mechanism="laplace",
...                 sensitivity=2.0, eps=0.9),
...         Release(name="laplace count", account="owner", to=("curator", "consumer"), mechanism="laplace",
...                 sensitivity=1.0, eps=0.1),
...     ),
... )
>>> plan.declared().cost.eps
1.0
>>> ledger = plan.ledger("owner")
>>> plan.spend(ledger, "laplace sum").eps
0.9
>>> plan.release("laplace count").laplace_scale()
10.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

from marketplace.privacy import coupling
from marketplace.privacy.composition import check_theorem
from marketplace.privacy.ledger import BudgetExceeded, PrivacyLedger
from marketplace.privacy.lifetime.cost import Cost
from marketplace.privacy.lifetime.declared import Declared
from marketplace.privacy.lifetime.ledger import RELATION_WORDS
from marketplace.privacy.neighbouring import Neighbouring
from marketplace.privacy.steps import Step
from marketplace.schema import SchemaError

__all__ = ["Account", "PlanExceeded", "Release", "ReleasePlan"]

T = TypeVar("T")


class PlanExceeded(RuntimeError):
    """A party was asked to record a release its plan does not declare, or more of it than declared:
    a protocol bug, never a data-dependent event (the message names the party, release and counts)."""


@dataclass(frozen=True, kw_only=True)
class Account:
    """One ledger of a party's data: ``name`` (``"owner"``, ``"auction"``, ``"D_s"``), its
    ``neighbouring`` relation, how its releases compose (``theorem`` with slack ``delta``, Gaussian
    steps by ``gaussian``), its ``budget`` if one is set, and the scenario keys that set it
    (``budget_keys``: the eps key, and the delta key when it differs), named when a plan passes it.
    ``coins`` says what a sampled choice's coins decide (:class:`PrivacyLedger`)."""

    name: str
    neighbouring: Neighbouring
    theorem: str = "basic"
    delta: float | None = None
    budget: tuple[float, float] | None = None
    budget_keys: tuple[str, ...] = ()
    gaussian: str = "exact"
    coins: str | None = None
    dataset: str = ""
    """The ledger's name in a report; default: the account's name."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"The 'name' of an Account must be a non-empty string. Got {self.name!r} instead.")
        check_theorem(self.theorem, f"Account {self.name!r}")
        if self.budget is not None and not self.budget_keys:
            raise ValueError(f"Account {self.name!r} has a budget: name the scenario key that sets it (budget_keys)")


@dataclass(frozen=True, kw_only=True)
class Release:
    """Up to ``count`` releases of one mechanism on a party's data, each costing ``eps`` (with
    ``delta``) or ``rho`` (``gaussian``: a Gaussian mechanism, accounted exactly), charged to
    ``account``, received by the parties in ``to``. ``sensitivity`` is the bound the mechanism is
    calibrated to, from public settings, in the ``norm`` it is measured in (``"L1"``, ``"L2"``, or
    ``"utility"`` for a selection's score range)."""

    name: str
    account: str
    to: tuple[str, ...]
    mechanism: str
    sensitivity: float
    norm: str = "L1"
    eps: float | None = None
    delta: float = 0.0
    rho: float | None = None
    gaussian: bool = False
    count: int = 1

    def __post_init__(self) -> None:
        self.step()  # the cost is a valid ledger step (one of eps and rho, each in range)
        if not (
            isinstance(self.sensitivity, (int, float)) and math.isfinite(self.sensitivity) and self.sensitivity > 0
        ):
            raise ValueError(
                f"Release {self.name!r}: 'sensitivity' must be a finite number > 0 (from public bounds). "
                f"Got {self.sensitivity!r} instead."
            )
        if not self.to or not all(isinstance(party, str) and party for party in self.to):
            raise ValueError(f"Release {self.name!r}: 'to' must name who receives it. Got {self.to!r} instead.")

    def step(self, count: int | None = None) -> Step:
        """The ledger step of ``count`` (default: all planned) of these releases."""
        return Step(
            mechanism=self.name,
            eps=self.eps,
            delta=self.delta,
            rho=self.rho,
            gaussian=self.gaussian,
            count=self.count if count is None else count,
        )

    def laplace_scale(self) -> float:
        """The Laplace scale b = sensitivity / eps that makes one release eps-DP."""
        if self.eps is None or self.delta:
            raise ValueError(f"Release {self.name!r} is not a pure eps-DP release: it has no Laplace scale")
        return self.sensitivity / self.eps

    def cost(self) -> Cost:
        """What one of these releases costs, as a lifetime ledger takes it."""
        if self.eps is None:
            return Cost(rho=self.rho)
        return Cost(eps=self.eps, delta=self.delta, rho=self.eps**2 / 2 if not self.delta else None)


@dataclass(frozen=True, kw_only=True)
class ReleasePlan:
    """Every release of ``party``'s data that a run may make, each charged to one of ``accounts``.

    ``what`` names the run's release for the party's lifetime history; ``relation`` is the relation
    its declared cost holds under; ``not_covered`` says what leaves the party that the cost does not
    bound (points handed over in the clear, say), and ``unbounded`` why no finite cost bounds the run
    at all (a release in the clear): such a plan declares no cost, and a ledger declines it. A plan
    without releases and without ``unbounded`` releases nothing of the party's data."""

    party: str
    what: str
    relation: str
    accounts: tuple[Account, ...] = ()
    releases: tuple[Release, ...] = ()
    unbounded: str = ""
    not_covered: str = ""
    state_rho: bool = False
    """Whether the declared cost of a plan of pure eps-DP releases states its zCDP figure too (each
    release eps^2/2, added up: tighter than the ledger's eps^2/2 of the total). A plan with a
    Gaussian or zCDP release always states it."""
    min_eps: float = field(default=0.0)
    """A floor on the declared eps (a run that sells points with no noisy release still charges a
    negligible cost, so that its sale is on the ledger): an overstatement of the cost, never of the
    privacy."""

    def __post_init__(self) -> None:
        names = [account.name for account in self.accounts]
        if len(set(names)) != len(names):
            raise ValueError(f"ReleasePlan of {self.party}: account names repeat: {names}")
        seen: set[str] = set()
        for release in self.releases:
            if release.account not in names:
                raise ValueError(
                    f"ReleasePlan of {self.party}: release {release.name!r} is charged to account "
                    f"{release.account!r}, which the plan does not declare ({names})"
                )
            if release.name in seen:
                raise ValueError(f"ReleasePlan of {self.party}: release {release.name!r} is declared twice")
            seen.add(release.name)
        if self.relation not in RELATION_WORDS:
            raise ValueError(
                f"ReleasePlan of {self.party}: 'relation' must be one of {list(RELATION_WORDS)}. "
                f"Got {self.relation!r} instead."
            )

    # --- reading the plan --------------------------------------------------------------------------

    def release(self, name: str) -> Release:
        """The release named ``name``; :class:`PlanExceeded` if the plan does not declare it."""
        for release in self.releases:
            if release.name == name:
                return release
        raise PlanExceeded(
            f"{self.party}: release {name!r} is not in its plan ({[r.name for r in self.releases]}): "
            "a release must be declared before it is made"
        )

    def account(self, name: str) -> Account:
        for account in self.accounts:
            if account.name == name:
                return account
        raise PlanExceeded(f"{self.party}: no account {name!r} in its plan ({[a.name for a in self.accounts]})")

    def steps(self, account: str) -> list[Step]:
        """The planned ledger steps of ``account``, in plan order."""
        return [release.step() for release in self.releases if release.account == account]

    # --- what comes from it ------------------------------------------------------------------------

    def ledger(self, account: str, *, budget: bool = True) -> PrivacyLedger:
        """A new ledger for ``account`` (with its budget unless ``budget=False``)."""
        spec = self.account(account)
        return PrivacyLedger(
            spec.dataset or spec.name,
            neighbouring=spec.neighbouring,
            budget=spec.budget if budget else None,
            theorem=spec.theorem,
            delta=spec.delta,
            gaussian=spec.gaussian,
            coins=spec.coins,
        )

    def spend(self, ledger: PrivacyLedger, name: str, count: int | None = None) -> Step:
        """Record ``count`` (default: all planned) of release ``name`` on ``ledger``, the ledger of its
        account; :class:`PlanExceeded` when that would pass the plan's count for it (the ledger's own
        budget refuses with :class:`BudgetExceeded`). Returns the step recorded."""
        release = self.release(name)
        step = release.step(count)
        done = sum(s.count for s in ledger.steps if s.mechanism == name)
        if done + step.count > release.count:
            raise PlanExceeded(
                f"{self.party}: release {name!r} planned {release.count} time(s), asked for "
                f"{done + step.count}: every release is charged as planned, never more"
            )
        if step.count:
            ledger.record(step)
        return step

    def released(self, name: str, output: T) -> T:
        """``output``, the result of release ``name`` (its noisy value, or whatever the mechanism
        returns), as it leaves the party. Every release's output passes here: that is where the
        coupled differential test (:mod:`marketplace.privacy.coupling`) records and replays it.
        :class:`PlanExceeded` for a release the plan does not declare."""
        self.release(name)
        return coupling.released(self.party, name, output)

    def check(self) -> None:
        """Refuse a plan that passes a budget, before anything starts: :class:`SchemaError` naming
        the key that sets the budget and what the plan would spend."""
        for spec in self.accounts:
            if spec.budget is None:
                continue
            try:
                self.ledger(spec.name).check_plan(self.steps(spec.name))
            except BudgetExceeded as err:
                keys = spec.budget_keys
                key = keys[1] if len(keys) > 1 and err.planned.eps <= spec.budget[0] * (1 + 1e-9) else keys[0]
                raise SchemaError(key, f"a budget that covers {self.party}'s planned releases", str(err)) from None

    def totals(self) -> dict[str, Any]:
        """Each account's planned total ``(eps, delta)``, composed as its ledger composes it."""
        return {
            spec.name: self.ledger(spec.name, budget=False).check_plan(self.steps(spec.name)) for spec in self.accounts
        }

    def declared(self) -> Declared | None:
        """The party's lifetime charge for the run: the accounts' planned totals added up (basic
        composition across accounts), with a zCDP statement when every release has one and the plan
        states it (:attr:`state_rho`, or a Gaussian or zCDP release); an
        unbounded release when the plan says so; None when the plan releases nothing."""
        if self.unbounded:
            return Declared.unbounded_release(self.what, self.unbounded, relation=self.relation)
        if not self.releases:
            return None
        totals = self.totals().values()
        eps = sum(total.eps for total in totals)
        delta = sum(total.delta for total in totals)
        rhos = [release.cost().rho for release in self.releases]
        stated = self.state_rho or any(release.rho is not None for release in self.releases)
        rho = (
            sum((r or 0.0) * release.count for r, release in zip(rhos, self.releases))
            if stated and all(r is not None for r in rhos)
            else None
        )
        what = self.what + (f"; not covered: {self.not_covered}" if self.not_covered else "")
        return Declared(what, Cost(eps=max(eps, self.min_eps), delta=delta, rho=rho or None), self.relation)

    def describe(self) -> list[dict[str, Any]]:
        """The plan as a table: one row per release (what, account, to whom, mechanism, sensitivity, cost, count)."""
        return [
            {
                "release": release.name,
                "account": release.account,
                "to": list(release.to),
                "mechanism": release.mechanism,
                "sensitivity": release.sensitivity,
                "norm": release.norm,
                **{k: v for k, v in release.step().to_dict().items() if k not in ("mechanism",)},
            }
            for release in self.releases
        ]
