"""What the marketplace runtime calls to run ``noisy_count``: its :class:`marketplace.plugins.Exchange`.

Required (abstract in :class:`~marketplace.plugins.Exchange`): ``build_role``, ``check_plan``,
``progress``, ``report``, ``head_rows``, ``tables``, ``sweep_row``, ``sweep_table``, ``plot_sweep``.
Optional, and given here: ``release_plan`` (what a run releases about each party's data, declared
once in :mod:`marketplace_example.plan`: the runtime checks its budget before the run, and an owner
that keeps a lifetime ledger is charged it; without it such an owner declines every run),
``declared_view`` (what every other party receives, which the coupled differential test holds the
protocol to), ``check_world``, ``nothing_released`` and ``owner_exposure``. The plug-in's spec names the
class: ``exchange="marketplace_example.exchange:NoisyCountExchange"``.

The report compares the consumer's total with the *true* count of rows of class ``label`` held by
the owners whose releases it adds up. The runner computes that count from every owner's rows, for
evaluation only: no party of the protocol ever sees it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from marketplace.data.dataset import Dataset
from marketplace.data.world import World
from marketplace.parties import party_ids
from marketplace.plugins import Exchange
from marketplace.privacy import noise as noise_streams
from marketplace.privacy.noise import NoiseOrigin
from marketplace.privacy.plan import ReleasePlan
from marketplace.privacy.view import Seen
from marketplace.reporting.format import accountant_text, fmt, mean_sd, relation_text, sweep_table_head
from marketplace.reporting.per_owner import Exposure
from marketplace.reporting.plots import eps_spent, sweep_figure
from marketplace.roles import CONSUMER, CURATOR, Role
from marketplace_example.plan import NAME, VIEW, release_plan


class NoisyCountExchange(Exchange):
    """Each owner releases a Laplace-noised count of its rows of one class; the curator adds them up."""

    def secure_noise(self, config: Any) -> bool:
        """Whether the run draws its noise in ``secure`` mode (``noisy_count.secure``)."""
        return bool(config.noisy_count.secure)

    def build_role(
        self, config: Any, party: str, world: World, owner_data: Dataset | None, noise: NoiseOrigin | None = None
    ) -> Role:
        """The role of ``party``: the curator, the consumer, or an owner holding its share of ``world``
        (or ``owner_data``, an owner's own data file). Each owner's noise comes from its own stream."""
        from marketplace_example.consumer import NoisyCountConsumer
        from marketplace_example.curator import NoisyCountCurator
        from marketplace_example.owner import NoisyCountOwner

        settings = config.noisy_count
        ids = party_ids(config)
        if party == CURATOR:
            return NoisyCountCurator(scenario_name=config.name, owners=tuple(ids[1:-1]), settings=settings)
        if party == CONSUMER:
            return NoisyCountConsumer(scenario_name=config.name)
        data = owner_data if owner_data is not None else world.owners[ids.index(party) - 1]
        return NoisyCountOwner(
            party_id=party,
            scenario_name=config.name,
            data=data,
            settings=settings,
            plan=release_plan(config, party),
            seed=noise_streams.derive(config.seed, f"{NAME}.noise.{party}", noise),
        )

    def release_plan(self, config: Any, party: str) -> ReleasePlan:
        """What a run releases about ``party``'s data (:mod:`marketplace_example.plan`): the runtime
        checks it against the budget before the run, and an owner's lifetime ledger is charged it."""
        return release_plan(config, party)

    def declared_view(self, config: Any) -> tuple[Seen, ...]:
        """What the curator, the consumer and the other owners receive (:data:`marketplace_example.plan.VIEW`)."""
        return VIEW

    def check_plan(self, config: Any) -> None:
        """Nothing to check beyond the release plan, whose budget the runtime checks."""

    def check_world(self, config: Any, world: World) -> None:
        """The counted class must exist in the data (ValueError "noisy_count.label: ...")."""
        labels = np.unique(np.concatenate([o.y for o in world.owners]))
        if config.noisy_count.label not in labels:
            raise ValueError(
                f"{NAME}.label: expected one of the owners' classes {labels.tolist()}, got {config.noisy_count.label}"
            )

    def progress(self, config: Any, curator: Role) -> tuple[int, int]:
        """(releases received, owners): the in-process driver's progress bar."""
        return curator.progress(), config.parties.owners

    def nothing_released(self, config: Any, results: dict[str, dict[str, Any]]) -> str | None:
        """Why the run ended with no owner's release in the total, or None."""
        return None if (results.get(CURATOR) or {}).get("released") else "no owner released its count (count_release)"

    # --- the report ------------------------------------------------------------------------------

    def report(self, config: Any, world: World, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The report's protocol sections: ``privacy`` (one ledger per owner), ``metrics`` and ``end_reason``."""
        s = config.noisy_count
        consumer = results.get(CONSUMER) or {}
        owners = list(consumer.get("owners") or [])
        index = {p: i for i, p in enumerate(party_ids(config))}
        true = sum(int(np.count_nonzero(world.owners[index[o] - 1].y == s.label)) for o in owners) if owners else None
        total = consumer.get("total")
        error = None if total is None or true is None else total - true
        metrics = {
            "label": s.label,
            "owners_in_total": len(owners),
            "released_total": total,
            "true_total": true,
            "error": error,
            "abs_error": None if error is None else abs(error),
            # the sum of n independent Lap(1/eps) draws has variance 2 n / eps^2
            "noise_sd": math.sqrt(2 * len(owners)) / s.epsilon if owners else None,
        }
        privacy: dict[str, Any] = {
            p: (results.get(p) or {}).get("privacy") or {"note": "no release recorded (dropped out or failed)"}
            for p in party_ids(config)[1:-1]
        }
        privacy[CONSUMER] = {
            "guarantee": "none",
            "note": "the consumer sends nothing derived from its data in this protocol",
        }
        return {"privacy": privacy, "metrics": metrics, "end_reason": (results.get(CURATOR) or {}).get("end_reason")}

    def owner_exposure(self, config: Any, report: dict[str, Any]) -> dict[str, list[Exposure]]:
        """Per owner: its noisy count reaches the curator, and inside the sum the consumer; both are
        bounded by the owner's own ledger. Other owners receive nothing of it."""
        return {
            owner: [
                Exposure("curator", "this owner's noisy count", (owner,)),
                Exposure("consumer", "the sum of the owners' noisy counts", (owner,)),
                Exposure("other owners", "nothing derived from this owner's rows"),
            ]
            for owner in party_ids(config)[1:-1]
        }

    def head_rows(self, report: dict[str, Any]) -> list[tuple[str, str]]:
        """Lines of the run's summary table: the task, the result, each owner's privacy cost."""
        m = report.get("metrics") or {}
        rows = [
            ("task", f"count the rows of class {m.get('label')} held by {m.get('owners_in_total')} owners"),
            (
                "count",
                (
                    f"released {fmt(m.get('released_total'))}, true {fmt(m.get('true_total'))}, "
                    f"error {fmt(m.get('error'))} (noise sd {fmt(m.get('noise_sd'))})"
                ),
            ),
        ]
        for party, ledger in (report.get("privacy") or {}).items():
            if isinstance(ledger, dict) and "eps" in ledger:
                rows.append(
                    (
                        "privacy",
                        (f"{party}: eps = {fmt(ledger['eps'])} ({accountant_text(ledger)}); {relation_text(ledger)}"),
                    )
                )
        return rows

    def tables(self, report: dict[str, Any]) -> list[Table]:
        """The protocol's own table: the released total next to the true count."""
        m = report.get("metrics") or {}
        table = Table(title=f"noisy count of class {m.get('label', '-')}", title_justify="left")
        table.add_column("what")
        table.add_column("value", justify="right")
        table.add_row("released total (sum of noisy counts)", fmt(m.get("released_total")))
        table.add_row("true total", fmt(m.get("true_total")))
        table.add_row("error", fmt(m.get("error")))
        table.add_row("noise sd (expected)", fmt(m.get("noise_sd")), style="dim")
        return [table]

    # --- sweeps ----------------------------------------------------------------------------------

    def sweep_row(self, report: dict[str, Any]) -> dict[str, Any]:
        """What one run of a sweep records (runs.csv): the count's error, each owner's eps, and
        ``eps_spent``/``delta_spent``, what the owner that gave up most gave up (each owner's count is
        bounded by its own ledger alone)."""
        m = report.get("metrics") or {}
        row = {k: m.get(k) for k in ("released_total", "true_total", "abs_error", "noise_sd")}
        owners = {
            party: [ledger]
            for party, ledger in (report.get("privacy") or {}).items()
            if party.startswith("owner-") and isinstance(ledger, dict)
        }
        row.update(eps_spent(owners))
        for party, [ledger] in owners.items():
            if "eps" in ledger:
                row[f"eps[{party}]"] = ledger["eps"]
        return row

    def sweep_table(self, summary: list[dict[str, Any]], keys: list[str], title: str) -> Table:
        """A sweep's summary: one row per point, mean ± sd over repeats."""
        table = sweep_table_head(title, "|error|: mean±sd over repeats (lower is better)", keys)
        for name in ("ok", "|error|", "noise sd", "eps spent"):
            table.add_column(name, justify="right", no_wrap=True)
        for row in summary:
            table.add_row(
                *(fmt(row.get(k)) for k in keys),
                f"{row['completed']}/{row['runs']}",
                mean_sd(row, "abs_error", ".2f"),
                mean_sd(row, "noise_sd", ".2f", sd=False),
                mean_sd(row, "eps_spent", ".4g", sd=False),
            )
        return table

    def plot_sweep(self, summary: list[dict[str, Any]], keys: list[str], path: Path, *, title: str) -> None:
        """sweep.png: |error| and the expected noise sd against the first swept key."""
        sweep_figure(
            summary,
            keys,
            path,
            title=title,
            panels=[("|released - true|", [("protocol", "abs_error", True), ("noise sd", "noise_sd", True)])],
        )
