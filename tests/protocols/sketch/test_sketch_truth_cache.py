"""The truth a sketch report compares with is computed once per world, settings and owners: a served
marketplace's later sessions get the same statistics, each its own copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from marketplace import plugins
from marketplace.parties import make_world
from marketplace.protocols.sketch import evaluate
from marketplace.protocols.sketch.consumer import plan_statistics
from marketplace.protocols.sketch.public import query_plan, unit_records
from marketplace.scenario import Scenario

QUICKSTART = Path(__file__).resolve().parents[3] / "scenarios" / "sketch-quickstart.yaml"


def test_the_truth_is_computed_once_per_world_and_owners_and_each_caller_gets_its_own_copy(monkeypatch):
    config = Scenario.from_file(QUICKSTART, seed=3).config
    world = make_world(config, plugins.exchange("sketch"))
    calls = []
    real = plan_statistics

    def counted(U: np.ndarray, plan: object) -> dict:
        calls.append(len(U))
        return real(U, plan)

    monkeypatch.setattr("marketplace.protocols.sketch.consumer.plan_statistics", counted)
    first = evaluate.truth(config, world, ["owner-1", "owner-2"])
    first["moments"]["1"][0] = 1e9  # a report that changes its copy changes nothing kept
    again = evaluate.truth(config, world, ["owner-1", "owner-2"])
    U = np.vstack([unit_records(config, world.owners[i]) for i in (0, 1)])
    assert again == real(U, query_plan(config)) and len(calls) == 1
    evaluate.truth(config, world, ["owner-1"])  # other owners: computed
    assert len(calls) == 2
