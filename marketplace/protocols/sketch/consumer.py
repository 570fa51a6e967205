"""The consumer's side of `sketch`: receive the owners' sketches and their merge, fit M²M once, answer
every configured query, and rank the owners by how close their data are to its own.

Everything here after the publication arrives is post-processing of DP releases: it costs no
privacy and sends no message, however many queries are asked (:func:`answer_queries` is the same
function the ``marketplace sketch query`` command runs on a saved sketch file).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.protocols.sketch import (
    FeatureMap,
    M2MDesign,
    M2MFit,
    Prior,
    SketchRelease,
    mean_embedding,
    merge_sketches,
    rank_owners,
    sketch_mmd2,
)
from marketplace.protocols.sketch.messages import SketchMessage, SketchPublication
from marketplace.protocols.sketch.signal import release_signal
from marketplace.protocols.sketch.valid import change, project_cdf, project_counts, project_moment_answers
from marketplace.roles import CONSUMER, Role, Send
from marketplace.warm_imports import wait_for_background_imports

MERGE_TOLERANCE = 1e-9
"""Largest relative gap accepted between the published merge and the sum of the published parts."""


@dataclass(frozen=True)
class QueryPlan:
    """What to estimate from one sketch (unit-box coordinates). ``count_boxes`` is a list of
    (lower, upper) pairs of length-d arrays (-inf/inf for an unconstrained attribute)."""

    moments: int = 1
    cdf_points: tuple[float, ...] = ()
    covariance: bool = False
    count_boxes: tuple[tuple[np.ndarray, np.ndarray], ...] = ()
    logistic_label: int | None = None
    logistic_l2: float = 1e-3

    @property
    def size(self) -> int:
        """How many statistics the plan asks for (for the report)."""
        return (
            self.moments
            + (len(self.cdf_points) > 0)
            + self.covariance
            + len(self.count_boxes)
            + (self.logistic_label is not None)
        )


def answer_queries(fit: M2MFit, plan: QueryPlan) -> dict[str, Any]:
    """Every estimate of ``plan`` from one M²M fit, as plain lists (JSON-ready), projected onto the
    values a real dataset could give (:mod:`~marketplace.protocols.sketch.valid`: free under DP).
    Moments, variances and the covariance are projected together, so that they agree with each
    other (``variances`` is given whenever the second moments or the covariance are asked).
    ``projections`` says, per statistic, whether its projection moved it, by how much at most and
    which attributes (count queries, for counts) it moved."""
    out: dict[str, Any] = {"n_estimate": max(fit.n_estimate, 0.0), "lambda": fit.lam}
    moved: dict[str, Any] = {}
    if plan.moments or plan.covariance:
        box = fit.design.feature_map.box
        mean = fit.moments(1)
        raw = {str(k): (mean if k == 1 else fit.moments(k)).tolist() for k in range(1, plan.moments + 1)}
        second = fit.moments(2) if plan.covariance and plan.moments < 2 else None  # another estimate of the variances
        answers, moved = project_moment_answers(
            raw, fit.covariance() if plan.covariance else None, mean, lower=box.lower, upper=box.upper, second=second
        )
        out.update(answers)
    if plan.cdf_points:
        points = np.array(plan.cdf_points)
        raw_cdf = fit.cdf(points)
        values, _ = project_cdf(raw_cdf, points)
        moved["cdf"] = change(raw_cdf, values)
        out["cdf"] = {"points": list(plan.cdf_points), "values": values.tolist()}
    if plan.count_boxes:
        lower = np.array([b[0] for b in plan.count_boxes])
        upper = np.array([b[1] for b in plan.count_boxes])
        raw_fractions = np.atleast_1d(fit.fraction(lower, upper))
        fractions, counts, _ = project_counts(raw_fractions, out["n_estimate"])
        moved["counts"] = change(raw_fractions, fractions, axis_name="queries")
        out["counts"] = {"fractions": fractions.tolist(), "counts": counts.tolist()}
    out["projections"] = moved
    if plan.logistic_label is not None:
        model = fit.logistic_regression(plan.logistic_label, l2=plan.logistic_l2)
        out["logistic_regression"] = {
            "coef": model.coef.tolist(),
            "intercept": model.intercept,
            "converged": model.converged,
            "label": plan.logistic_label,
        }
    return out


def plan_statistics(U: np.ndarray, plan: QueryPlan) -> dict[str, Any]:
    """The exact statistics of the records ``U`` (unit-box coordinates) that ``plan`` asks for,
    in the shape of :func:`answer_queries`' estimates (``n``: the number of records)."""
    out: dict[str, Any] = {"n": int(len(U))}
    if not len(U):
        return out
    if plan.moments:
        out["moments"] = {str(k): (U**k).mean(axis=0).tolist() for k in range(1, plan.moments + 1)}
    if plan.cdf_points:
        out["cdf"] = {
            "points": list(plan.cdf_points),
            "values": [[float(np.mean(U[:, j] <= t)) for t in plan.cdf_points] for j in range(U.shape[1])],
        }
    if plan.covariance:
        out["covariance"] = np.cov(U.T, bias=True).reshape(U.shape[1], U.shape[1]).tolist()
    if plan.count_boxes:
        fractions = [float(np.mean(np.all((U >= lo) & (U <= hi), axis=1))) for lo, hi in plan.count_boxes]
        out["counts"] = {"fractions": fractions, "counts": [f * len(U) for f in fractions]}
    return out


def _relative(est: np.ndarray, true: np.ndarray) -> float:
    """Mean relative error over the entries (absolute error where the truth is 0)."""
    scale = np.where(np.abs(true) > 0, np.abs(true), 1.0)
    return float(np.mean(np.abs(est - true) / scale))


def statistic_errors(estimates: dict[str, Any], true: dict[str, Any]) -> dict[str, Any]:
    """How far each estimate of :func:`answer_queries` lies from the statistics ``true`` of
    :func:`plan_statistics` (the report's error metrics, ``ERROR_METRICS`` in :mod:`.display`); the
    size's error only when ``true`` holds ``n``."""
    errors: dict[str, Any] = {}
    for k, est in (estimates.get("moments") or {}).items():
        errors[f"moment{k}_mre"] = _relative(np.array(est), np.array(true["moments"][k]))
    if "cdf" in estimates:
        errors["cdf_mae"] = float(
            np.mean(np.abs(np.array(estimates["cdf"]["values"]) - np.array(true["cdf"]["values"])))
        )
    if "covariance" in estimates:
        est, ref = np.array(estimates["covariance"]), np.array(true["covariance"])
        errors["covariance_rel_fro"] = float(np.linalg.norm(est - ref) / np.linalg.norm(ref))
    if "counts" in estimates:
        est, ref = np.array(estimates["counts"]["fractions"]), np.array(true["counts"]["fractions"])
        errors["count_fraction_mae"] = float(np.mean(np.abs(est - ref)))
        nonzero = ref > 0
        errors["count_mre"] = (
            float(np.mean(np.abs(est[nonzero] - ref[nonzero]) / ref[nonzero])) if nonzero.any() else None
        )
    if "n_estimate" in estimates and true.get("n"):
        errors["count_total_rel"] = abs(estimates["n_estimate"] - true["n"]) / true["n"]
    return errors


def attribute_name(names: Sequence[str] | None, j: int) -> str:
    """Attribute ``j``'s name in ``names`` (the data's columns:
    :func:`~marketplace.protocols.sketch.public.attribute_names`), or the generic ``x<j>`` without one."""
    return str(names[j]) if names and 0 <= j < len(names) else f"x{j}"


def projection_notes(projections: dict[str, Any], names: Sequence[str] | None = None) -> list[str]:
    """One line per statistic that a projection moved: the orders (moments), the attributes (or
    count queries) it moved and the largest change. Attributes are called by ``names`` (the data's
    columns, :func:`~marketplace.protocols.sketch.public.attribute_names`), else x0, x1, ..."""
    lines = []
    for name, moved in projections.items():
        if not moved.get("changed"):
            continue
        orders = [k for k, o in (moved.get("orders") or {}).items() if o["changed"]]
        what = name + (f" of order{'s' if len(orders) > 1 else ''} {', '.join(orders)}" if orders else "")
        if moved.get("attributes"):
            what += " in " + ", ".join(attribute_name(names, j) for j in moved["attributes"])
        elif moved.get("queries"):
            what += (
                " of count quer"
                + ("ies " if len(moved["queries"]) > 1 else "y ")
                + ", ".join(str(q + 1) for q in moved["queries"])
            )
        lines.append(f"{what}: largest change {moved['max_change']:.4g}")
    return lines


def release_dict(release: SketchRelease) -> dict[str, Any]:
    """A release as plain data (JSON keeps every float exactly); :func:`release_from_dict` reads it."""
    return {
        "numerator": release.numerator.tolist(),
        "count": release.count,
        "numerator_variance": release.numerator_variance,
        "count_variance": release.count_variance,
        "map_fingerprint": release.map_fingerprint,
        "epsilon": release.epsilon if release.is_private else None,
        "delta": release.delta,
        "mechanism": release.mechanism,
        "parts": release.parts,
    }


def release_from_dict(data: dict[str, Any]) -> SketchRelease:
    fields = dict(data)
    fields["epsilon"] = math.inf if fields.get("epsilon") is None else fields["epsilon"]
    return SketchRelease(**fields)


class SketchConsumer(Role):
    role_name = "consumer"
    warm_imports: tuple[str, ...] = ("scipy.linalg",)
    """What the estimates import once the sketches have come (the M²M fit's Cholesky), loaded while
    the owners sketch; a plan of second moments or a covariance adds the joint projection's solver,
    a logistic plan its solver and its score. The projections need no scikit-learn
    (:mod:`~marketplace.protocols.sketch.isotonic`)."""

    def __init__(
        self,
        *,
        scenario_name: str,
        feature_map: FeatureMap,
        target: np.ndarray,
        plan: QueryPlan,
        test_X: np.ndarray | None,
        test_y: np.ndarray | None,
        design_seed: np.random.SeedSequence,
        samples: int,
        regularization: str,
        intercept: bool,
        rank: bool,
        own_evaluation: bool = False,
    ) -> None:
        super().__init__()
        self.party_id = CONSUMER
        self.scenario_name = scenario_name
        self.feature_map = feature_map
        self.target = feature_map.check(target, owner="the consumer's records")
        self.plan = plan
        self.test_X, self.test_y = test_X, test_y
        self.design_seed = design_seed
        self.samples = samples
        self.regularization = regularization
        self.intercept = intercept
        self.rank = rank
        self.fit: M2MFit | None = None
        self.releases: dict[str, SketchRelease] = {}
        self.merged: SketchRelease | None = None
        self.estimates: dict[str, Any] | None = None
        self.ranking: dict[str, Any] | None = None
        self.auc: float | None = None
        self.own_evaluation = own_evaluation
        """Whether this consumer is the only party that can evaluate what it bought (a marketplace
        described by its public schema: nobody holds the owners' rows to compute a truth from): it
        then also measures the merged sketch against its own records (:meth:`own_figures`)."""
        self.own: dict[str, Any] | None = None
        self.end_status = ""
        if plan.covariance or plan.moments >= 2 or plan.logistic_label is not None:
            self.warm_imports = (*self.warm_imports, "scipy.optimize")
        if plan.logistic_label is not None:
            self.warm_imports = (*self.warm_imports, "sklearn.metrics")

    def start(self) -> list[Send]:
        return [self.hello("sketch")]

    def handle(self, message: Envelope[SketchMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case SketchPublication():
                if self.merged is not None:
                    raise ProtocolError(
                        party=message.sender, kind=message.kind, reason="the sketches were already published"
                    )
                self._receive(message)  # checked and kept; the estimates are local work (finish)
                return []
            case Shutdown(status=status, reason=reason):
                if self.merged is None and status == "completed":
                    self.failure = f"run ended before the sketches arrived: {reason}"
                return self.acknowledge_shutdown(message)
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason="the sketch consumer does not accept this kind"
        )

    def _receive(self, message: Envelope) -> None:
        body: SketchPublication = message.body
        fmap = self.feature_map
        k = len(body.owners)

        def refuse(reason: str) -> ProtocolError:
            return ProtocolError(party=message.sender, kind=message.kind, reason=reason)

        if body.map_fingerprint != fmap.fingerprint or body.numerators.shape[1] != fmap.n_features:
            raise refuse(
                f"field 'map_fingerprint' expected the public map {fmap.fingerprint[:12]}... with {fmap.n_features} "
                f"features, got {body.map_fingerprint[:12]}... with {body.numerators.shape[1]}"
            )
        if body.numerators.shape[0] != k or not len(body.epsilons) == len(body.deltas) == len(body.mechanisms) == k:
            raise refuse(
                f"expected one numerator, count, variance, epsilon, delta and mechanism per owner ({k} owners)"
            )
        try:
            parts = [
                SketchRelease(
                    numerator=body.numerators[i],
                    count=float(body.counts[i]),
                    numerator_variance=float(body.numerator_variances[i]),
                    count_variance=float(body.count_variances[i]),
                    map_fingerprint=body.map_fingerprint,
                    epsilon=_stated(body.epsilons[i]),
                    delta=body.deltas[i],
                    mechanism=body.mechanisms[i],
                )
                for i in range(k)
            ]
        except (TypeError, ValueError) as err:
            raise refuse(f"a published release is invalid: {err}") from None
        merged = merge_sketches(parts)
        scale = max(1.0, float(np.abs(merged.numerator).max()))
        if float(np.abs(merged.numerator - body.merged_numerator).max()) > MERGE_TOLERANCE * scale or abs(
            merged.count - body.merged_count
        ) > MERGE_TOLERANCE * max(1.0, abs(merged.count)):
            raise refuse(
                "field 'merged_numerator'/'merged_count' expected the sum of the published parts, got something else"
            )
        self.releases = dict(zip(body.owners, parts))
        self.merged = merged

    def finish(self) -> None:
        """Estimate, rank and score from the merged sketch once the run is over for the consumer
        (after the ``bye`` that confirmed the publication arrived). The M²M fit is the heaviest step of
        a sketch run: done while the curator waits for that ``bye``, a busy machine made the curator
        give the consumer up and fail a run whose owners had already released. Post-processing only."""
        if self.merged is None or self.estimates is not None:
            return
        wait_for_background_imports()  # never import scikit-learn or SciPy beside the loading thread
        self.estimates = self.answer(self.plan)
        self._rank_and_score()
        if self.own_evaluation:
            self.own = self.own_figures()

    def _design(self) -> M2MDesign:
        discrete = {self.plan.logistic_label: (0.0, 1.0)} if self.plan.logistic_label is not None else {}
        prior = Prior(self.feature_map.box, discrete=discrete)
        return M2MDesign.shared(self.feature_map, seed=self.design_seed, n_samples=self.samples, prior=prior)

    def answer(self, plan: QueryPlan) -> dict[str, Any]:
        """Estimates of ``plan`` from the merged sketch (fitting M²M on first use). Post-processing
        only: any number of calls sends nothing and spends nothing."""
        if self.merged is None:
            raise RuntimeError("The sketch consumer has no sketch yet: answer() needs the curator's publication first.")
        wait_for_background_imports()
        if self.fit is None:
            self.fit = self._design().fit(self.merged, regularization=self.regularization, intercept=self.intercept)
        return answer_queries(self.fit, plan)

    def _rank_and_score(self) -> None:
        if self.rank and self.releases:
            owners = list(self.releases)
            target = mean_embedding(self.feature_map, self.target)
            ranking = rank_owners(target, [self.releases[o] for o in owners], self.feature_map)
            self.ranking = {
                "owners": owners,
                "mmd2": ranking.mmd2.tolist(),
                "order": [owners[i] for i in ranking.order],
            }
        lr = (self.estimates or {}).get("logistic_regression")
        if lr is not None and self.test_X is not None and self.test_y is not None and len(np.unique(self.test_y)) == 2:
            from sklearn.metrics import roc_auc_score

            scores = self.test_X @ np.array(lr["coef"]) + lr["intercept"]
            self.auc = float(roc_auc_score(self.test_y, scores))

    def own_figures(self) -> dict[str, Any]:
        """What the consumer can measure of its purchase with its own records alone, for the report
        when nobody holds the owners' rows: ``merged_mmd2``, the sketch estimate of MMD^2 between
        the owners' merged data and its own target (the ranking's measure, for the union); and
        ``target_gap``, how far each estimate from the merged sketch lies from the same statistic
        of its own target (the report's error metrics, with its target in place of the truth: a
        distance between the owners' data and what the consumer wants, not an estimation error).
        Only these numbers leave the consumer, never its target's statistics. ``absent``: the
        figures it could not compute, and why."""
        target = mean_embedding(self.feature_map, self.target)
        merged = sketch_mmd2(target, self.merged, self.feature_map) if self.merged is not None else None
        mine = {k: v for k, v in plan_statistics(self.target, self.plan).items() if k != "n"}  # no size: not comparable
        gap = statistic_errors(self.estimates, mine) if self.estimates and len(self.target) else {}
        absent = {}
        if self.plan.logistic_label is not None and self.test_X is None:
            absent["metrics.logistic_auc"] = (
                "the consumer brought no test set (the request's --test), so the model was not scored on one"
            )
        return {"merged_mmd2": merged, "target_gap": gap, "absent": absent}

    def result(self) -> dict[str, Any]:
        return {
            "estimates": self.estimates,
            "queries": self.plan.size,
            "ranking": self.ranking,
            "logistic_auc": self.auc,
            "signal": release_signal(self.merged) if self.merged is not None else None,
            "sketches": (
                {"merged": release_dict(self.merged), "owners": {o: release_dict(r) for o, r in self.releases.items()}}
                if self.merged is not None
                else None
            ),
            **({"own_evaluation": self.own} if self.own_evaluation else {}),
            "end_status": self.end_status,
        }


def _stated(epsilon: float | None) -> float:
    """A published release's guarantee: its eps, or math.inf for an exact (non-private) one."""
    return math.inf if epsilon is None else epsilon
