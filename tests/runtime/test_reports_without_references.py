"""A served simulation's session that did not ask for the central references
(:meth:`marketplace.plugins.Exchange.report_without_references`): sketch, stc and pfds leave out what
they would compute on everyone's rows, and the report names each figure it lacks
(``references_absent``, ``{"absent": why}`` in place) instead of leaving blanks."""

from __future__ import annotations

import pytest

import marketplace
from marketplace import plugins
from marketplace.parties import make_world
from marketplace.reporting.absent import NOT_ASKED, REFERENCES_ABSENT, is_absent
from marketplace.runtime.assemble import assemble_report

SKETCH = {
    "name": "refs-sketch",
    "protocol": "sketch",
    "seed": 3,
    "parties": {"owners": 2},
    "data": {
        "source": {
            "kind": "covariate_shift",
            "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 150},
        },
        "partition": {"scheme": "by_group", "skew": 0.8},
        "consumer": {"target_groups": [0], "validation_size": 20, "test_size": 20},
        "seed_set": {"size": 0},
    },
    "sketch": {
        "lower": [-12, -12, -12],
        "upper": [12, 12, 12],
        "map": {"kind": "rff", "features": 20, "sigma": 0.5},
        "epsilon": 0.5,
        "samples": 500,
        "queries": {"moments": 1, "covariance": False, "random_counts": 1},
    },
}


def without_references(scenario: marketplace.Scenario, tmp_path, *, references: bool = False) -> dict:
    """The run's report assembled again, as a served session that did not ask for the references
    (``references``: that did ask)."""
    ran = marketplace.run(scenario, tmp_path / "run", driver="inprocess")
    config = scenario.config
    exchange = plugins.exchange(config.protocol)
    world = make_world(config, exchange)
    parties = [ran.raw["party_details"][p] | {"id": p} for p in ran.raw["party_details"]]
    return assemble_report(scenario, world, "market", parties, None, 1.0, 0.0, "r1", exchange, references=references)


def test_a_sketch_report_without_references_says_what_it_lacks(tmp_path):
    report = without_references(marketplace.load(SKETCH), tmp_path)
    assert report["status"] == "completed"
    absent = report[REFERENCES_ABSENT]
    assert set(absent) >= {"truth", "metrics.errors"} and set(absent.values()) == {NOT_ASKED}
    assert report["truth"] == report["metrics"]["errors"] == {"absent": NOT_ASKED}
    assert report["estimates"]  # the protocol's own result is all there


def test_an_stc_report_without_references_says_what_it_lacks(tmp_path):
    scenario = marketplace.load("scenarios/stc-synthetic.yaml")
    report = without_references(scenario, tmp_path)
    assert report["status"] == "completed"
    assert report[REFERENCES_ABSENT] == {"metrics.baselines": NOT_ASKED}
    assert report["metrics"]["baselines"] == {"absent": NOT_ASKED}
    assert report["metrics"]["cost"] == pytest.approx(
        marketplace.run(scenario, tmp_path / "full", driver="inprocess").raw["metrics"]["cost"]
    )


def test_a_pfds_report_without_references_says_what_it_lacks(tmp_path):
    scenario = marketplace.load("scenarios/pfds-synthetic.yaml")
    report = without_references(scenario, tmp_path)
    assert report["status"] == "completed"
    baselines = scenario.config.pfds.baselines
    assert baselines and report[REFERENCES_ABSENT] == {f"metrics.{name}": NOT_ASKED for name in baselines}
    assert all(report["metrics"][name] == {"absent": NOT_ASKED} for name in baselines)
    full = without_references(scenario, tmp_path / "full", references=True)
    assert REFERENCES_ABSENT not in full and all(not is_absent(full["metrics"][name]) for name in baselines)
    assert report["metrics"]["pfds"] == full["metrics"]["pfds"]  # the protocol's own figures are all there
