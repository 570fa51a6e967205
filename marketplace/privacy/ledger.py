"""The per-dataset ledger: what has been spent on one protected dataset, composed into one
(eps, delta), and a refusal of any spend that would take it past its budget.

>>> from marketplace.privacy.neighbouring import replace_one
>>> ledger = PrivacyLedger("consumer:D_v", neighbouring=replace_one("a row of D_v"), budget=(1.41, 0.01),
...                        theorem="advanced")
>>> ledger.spend(0.01, mechanism="mwem", count=1656)
Guarantee(eps=1.4014..., delta=0.01)
>>> ledger.spend(0.01, mechanism="mwem", count=100)
Traceback (most recent call last):
  ...
marketplace.privacy.ledger.BudgetExceeded: consumer:D_v: refused, the planned spend exceeds ...
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from marketplace.privacy.composition import Guarantee, check_theorem
from marketplace.privacy.neighbouring import Neighbouring
from marketplace.privacy.noise import coins_note
from marketplace.privacy.params import fail, positive, probability
from marketplace.privacy.steps import Step, describe_step, merged_steps
from marketplace.privacy.totals import StepGroups, accountant_text

GAUSSIAN_ACCOUNTANTS = ("exact", "zcdp")
BUDGET_TOLERANCE = 1e-9  # relative slack when comparing a planned total with a budget (rounding)


class BudgetExceeded(ValueError):
    """A planned spend would take a dataset past its privacy budget (nothing was recorded)."""

    def __init__(
        self,
        dataset: str,
        budget: Guarantee,
        planned: Guarantee,
        theorem: str,
        steps: tuple[Step, ...],
        accountant: str,
    ) -> None:
        self.dataset, self.budget, self.planned, self.theorem, self.steps = dataset, budget, planned, theorem, steps
        self.accountant = accountant
        plan = ", ".join(describe_step(s) for s in steps) or "nothing"
        super().__init__(
            f"{dataset}: refused, the planned spend exceeds the privacy budget: "
            f"budget (eps={budget.eps:g}, delta={budget.delta:g}), "
            f"planned total (eps={planned.eps:.6g}, delta={planned.delta:.6g}) by {accountant} "
            f"after adding {plan}"
        )


class PrivacyLedger:
    """What has been spent on one protected dataset (``"consumer:D_v"``, ``"owner-1"``).

    ``neighbouring``: the relation the guarantee is stated for (required: an eps means nothing
    without it; see :mod:`.neighbouring`). ``budget``: an optional (eps, delta) that no spend may take
    the total past (compared with a relative tolerance of ``BUDGET_TOLERANCE``). ``theorem``: how
    :meth:`total` composes. ``delta``: the composition slack of advanced / optimal / zcdp; by default,
    with a budget, the budget's delta minus the steps' own deltas. ``gaussian``: how Gaussian-mechanism
    steps (:meth:`spend_gaussian`) are accounted: ``exact`` (their privacy-loss distribution, the
    tightest valid figure, :mod:`.gdp`) or ``zcdp`` (as rho-zCDP with the Canonne–Kamath–Steinke
    conversion, a looser bound kept as an option).

    How the total is composed. Steps with the same (eps, delta) form a homogeneous group; each group
    is composed by the theorem, or by basic composition when that is smaller, and the groups are
    then added up by basic composition. The slack delta is shared equally by the groups (plus one
    share for the zCDP steps, which are composed together in zCDP and converted). The reported delta
    is the steps' own deltas plus the shares actually used. Under ``theorem="zcdp"`` every pure step
    and zCDP step is composed in zCDP and converted once with the whole slack; approximate-DP steps
    are added by basic composition. Gaussian steps under ``gaussian="exact"``: alone, they compose
    exactly to one mu and convert exactly with the whole slack; next to other steps they get half
    the slack, the rest the other half, and the two add up, whenever that beats treating them as
    zCDP (the smaller valid figure is reported). :meth:`accountant` says which of these routes
    produced the total, part by part, so that a report never names a theorem that was not used.
    """

    def __init__(
        self,
        dataset: str,
        *,
        neighbouring: Neighbouring,
        budget: tuple[float, float] | None = None,
        theorem: str = "advanced",
        delta: float | None = None,
        gaussian: str = "exact",
        coins: str | None = None,
    ) -> None:
        if not isinstance(dataset, str) or not dataset:
            raise fail(
                TypeError if not isinstance(dataset, str) else ValueError,
                "dataset",
                "PrivacyLedger",
                "a non-empty string",
                dataset,
            )
        if not isinstance(neighbouring, Neighbouring):
            raise fail(
                TypeError,
                "neighbouring",
                "PrivacyLedger",
                "a Neighbouring (marketplace.privacy.neighbouring.replace_one / add_remove_one)",
                neighbouring,
            )
        if gaussian not in GAUSSIAN_ACCOUNTANTS:
            raise fail(ValueError, "gaussian", "PrivacyLedger", f"one of {list(GAUSSIAN_ACCOUNTANTS)}", gaussian)
        self.dataset = dataset
        self.neighbouring = neighbouring
        self.gaussian = gaussian
        self.theorem = check_theorem(theorem, "PrivacyLedger")
        self.noise: dict[str, Any] | None = None  # where the noise of its releases comes from (set by the party)
        if coins is not None and (not isinstance(coins, str) or not coins):
            raise fail(
                TypeError if not isinstance(coins, str) else ValueError,
                "coins",
                "PrivacyLedger",
                "a non-empty string or None",
                coins,
            )
        self.coins = coins
        """What the mechanism's coins decide (``"the auction's coins (...)"``), when its randomness is a
        sampled choice drawn from the party's noise stream rather than noise added to a value: whoever
        can reproduce the stream can reproduce the choice, and against them the ledger's eps does not
        hold; :meth:`to_dict` says so in the ledger's ``noise`` (``coins``)."""
        self.budget = None if budget is None else _budget(budget)
        self.delta = None if delta is None else probability(delta, "delta", "PrivacyLedger")
        if self.theorem != "basic" and self.delta is None and self.budget is None:
            raise ValueError(
                f"PrivacyLedger {dataset!r}: theorem {theorem!r} needs the composition slack "
                f"'delta' or a budget to take it from"
            )
        self._steps: list[Step] = []
        self._spent = StepGroups()

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    def spend(self, eps: float, delta: float = 0.0, *, mechanism: str, count: int = 1) -> Guarantee:
        """Record ``count`` releases of an (eps, delta)-DP ``mechanism``; return the new total.
        Raises :class:`BudgetExceeded` (recording nothing) if the total would pass the budget."""
        return self._record(Step(mechanism=mechanism, eps=eps, delta=delta, count=count))

    def spend_zcdp(self, rho: float, *, mechanism: str, count: int = 1) -> Guarantee:
        """Record ``count`` releases of a rho-zCDP ``mechanism`` that is not a plain Gaussian."""
        return self._record(Step(mechanism=mechanism, rho=rho, count=count))

    def spend_gaussian(self, rho: float, *, mechanism: str, count: int = 1) -> Guarantee:
        """Record ``count`` Gaussian mechanisms, each sensitivity^2 / (2 sigma^2) = ``rho`` (mu =
        sqrt(2 rho)): accounted exactly, or as rho-zCDP when the ledger says ``gaussian="zcdp"``."""
        return self._record(Step(mechanism=mechanism, rho=rho, count=count, gaussian=True))

    def check_plan(self, steps: Iterable[Step]) -> Guarantee:
        """The total if ``steps`` were spent too; :class:`BudgetExceeded` if it passes the budget.
        Records nothing: run it before a run starts."""
        planned = tuple(steps)
        for step in planned:
            if not isinstance(step, Step):
                raise fail(TypeError, "steps", "check_plan", "an iterable of Step", step)
        spent = self._spent.plus(planned)
        total, parts = spent.compose_parts(self.theorem, self._slack(spent, self.delta), self.gaussian)
        if self.budget is not None and not _within(total, self.budget):
            raise BudgetExceeded(
                self.dataset,
                self.budget,
                total,
                self.theorem,
                planned,
                accountant_text(parts, [*self._steps, *planned]),
            )
        return total

    def total(
        self, *, theorem: str | None = None, delta: float | None = None, gaussian: str | None = None
    ) -> Guarantee:
        """Everything spent, composed by ``theorem`` (default: the ledger's) with slack ``delta``."""
        theorem = self.theorem if theorem is None else check_theorem(theorem, "PrivacyLedger.total")
        delta = self.delta if delta is None else probability(delta, "delta", "PrivacyLedger.total")
        gaussian = self.gaussian if gaussian is None else gaussian
        return self._spent.compose_parts(theorem, self._slack(self._spent, delta), gaussian)[0]

    def accountant(self) -> str:
        """How :meth:`total` obtained its (eps, delta), in words: one of ``ACCOUNTANTS`` when one
        accountant covers every step, else each part with the steps it covers (``"advanced
        composition (...) for 1656 x h2.select, 1656 x h2.measure; basic composition for 1 x
        auction; the parts added by basic composition"``)."""
        _, parts = self._spent.compose_parts(self.theorem, self._slack(self._spent, self.delta), self.gaussian)
        return accountant_text(parts, self._steps)

    def to_dict(self) -> dict[str, Any]:
        """``{dataset, eps, delta, accountant, configured_theorem, neighbouring, slack_delta, budget,
        steps}`` for a report (identical steps merged, counts added; ``gaussian_accountant`` when a
        Gaussian step exists). ``accountant`` says what produced (eps, delta);
        ``configured_theorem`` is the composition theorem set for the (eps, delta) steps, null when
        the ledger holds none (Gaussian and zCDP steps never use it)."""
        total, parts = self._spent.compose_parts(self.theorem, self._slack(self._spent, self.delta), self.gaussian)
        budget = None if self.budget is None else {"eps": self.budget.eps, "delta": self.budget.delta}
        has_dp_steps = bool(self._spent.counts)
        out = {
            "dataset": self.dataset,
            "eps": total.eps,
            "delta": total.delta,
            "accountant": accountant_text(parts, self._steps),
            "configured_theorem": self.theorem if has_dp_steps else None,
            "neighbouring": self.neighbouring.to_dict(),
            "slack_delta": self._slack(self._spent, self.delta),
            "budget": budget,
            "steps": merged_steps(self._steps),
        }
        if self._spent.gauss_rho > 0:
            out["gaussian_accountant"] = self.gaussian
        if self.noise is not None:
            noise = dict(self.noise)
            coins = coins_note(self.noise, self.coins) if self.coins else None
            if coins:
                noise["coins"] = coins
            out["noise"] = noise
        return out

    def __repr__(self) -> str:
        return f"PrivacyLedger({self.dataset!r}, theorem={self.theorem!r}, total={tuple(self.total())})"

    def record(self, step: Step) -> Guarantee:
        """Record ``step`` as it is (what :meth:`spend`, :meth:`spend_zcdp` and :meth:`spend_gaussian`
        build); return the new total. Raises :class:`BudgetExceeded` (recording nothing) past the budget."""
        return self._record(step)

    def _record(self, step: Step) -> Guarantee:
        total = self.check_plan([step])
        self._steps.append(step)
        self._spent = self._spent.plus([step])
        return total

    def _slack(self, spent: StepGroups, delta: float | None) -> float:
        if delta is not None:
            return delta
        if self.budget is None:
            return 0.0
        return max(0.0, self.budget.delta - spent.own_delta())


def _budget(value: Any) -> Guarantee:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise fail(TypeError, "budget", "PrivacyLedger", "a pair (eps, delta)", value)
    return Guarantee(
        positive(value[0], "budget[0] (eps)", "PrivacyLedger"),
        probability(value[1], "budget[1] (delta)", "PrivacyLedger"),
    )


def _within(total: Guarantee, budget: Guarantee) -> bool:
    slack = 1 + BUDGET_TOLERANCE
    return total.eps <= budget.eps * slack and total.delta <= budget.delta * slack
