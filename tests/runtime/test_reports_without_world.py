"""Reports of a marketplace described by its public schema (``data.schema``): nobody holds every
party's rows, so the report takes the quality figures the consumer computed from its own rows,
states every reference that needs everyone's rows absent (``references_absent``, and
``{"absent": why}`` in place), and its ``data`` section holds the schema and no row counts.

Each run here is served the way a session of ``marketplace serve`` is: every party builds its role
from its own share of the empty world plus its own files (:func:`marketplace.parties.own_rows`),
the in-process driver moves the messages, each party writes its own report, and the report is
assembled from those (:func:`marketplace.runtime.assemble.assemble_from_party_reports`), with the world
the server has: no rows at all."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from marketplace import plugins
from marketplace.parties import build_role, make_world, own_rows, party_ids, share_of, with_own_rows
from marketplace.reporting.absent import REFERENCES_ABSENT, absent_line, is_absent
from marketplace.runner.display import summary_tables
from marketplace.runner.report_schema import report_problems
from marketplace.runtime.assemble import assemble_from_party_reports, data_section
from marketplace.runtime.json_files import write_json
from marketplace.runtime.nodes import noise_origin
from marketplace.runtime.party_reports import party_report
from marketplace.scenario import Scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node

DIM = 4
CLASSES = (0, 1, 2, 3, 4, 5)


def schema(classes=CLASSES, dim: int = DIM) -> dict:
    return {
        "features": [{"name": f"x{i}", "lower": -12, "upper": 12} for i in range(dim)],
        "label": {"name": "label", "classes": list(classes)},
    }


def market(protocol: str, section: dict, *, owners: int = 3, classes=CLASSES) -> Scenario:
    return Scenario.from_dict(
        {
            "name": f"served-{protocol}",
            "protocol": protocol,
            "seed": 3,
            "parties": {"owners": owners},
            "data": {"schema": schema(classes)},
            protocol: section,
        }
    )


def write_rows(path: Path, n: int, rng: np.random.Generator, *, shift: float, classes=CLASSES) -> Path:
    """A party's own CSV file: ``n`` rows of the schema's columns, features around ``shift``."""
    X = np.clip(rng.normal(shift, 2.0, (n, DIM)), -12, 12)
    y = rng.choice([int(c) for c in classes], size=n)
    lines = [",".join([*(f"x{i}" for i in range(DIM)), "label"])]
    lines += [",".join([*(f"{v:.6f}" for v in x), str(label)]) for x, label in zip(X, y)]
    path.write_text("\n".join(lines) + "\n")
    return path


def party_files(
    tmp_path: Path, scenario: Scenario, *, rows: int = 120, test: bool = True, classes=CLASSES
) -> dict[str, dict[str, Path]]:
    """Each owner's file and the consumer's target (and test set): the owners' data lie at
    different shifts, the consumer's target near owner-1's."""
    rng = np.random.default_rng(5)
    files: dict[str, dict[str, Path]] = {}
    for i in range(scenario.config.parties.owners):
        owner = f"owner-{i + 1}"
        files[owner] = {"data": write_rows(tmp_path / f"{owner}.csv", rows, rng, shift=-3.0 + 3.0 * i, classes=classes)}
    files["consumer"] = {"data": write_rows(tmp_path / "target.csv", 60, rng, shift=-3.0, classes=classes)}
    if test:
        files["consumer"]["test"] = write_rows(tmp_path / "test.csv", 60, rng, shift=-3.0, classes=classes)
    return files


def served_run(scenario: Scenario, files: dict[str, dict[str, Path]], tmp_path: Path) -> dict:
    """Run ``scenario`` as a served session would (module docstring) and return its report."""
    config = scenario.config
    world = make_world(config, plugins.exchange(config.protocol))
    assert not world.central
    parties = frozenset(party_ids(config))
    nodes = []
    for party in party_ids(config):
        own = own_rows(config, party, **files.get(party, {}))
        role = build_role(
            config,
            party,
            world=with_own_rows(share_of(world, party), own),
            owner_data=own.get("owner"),
            noise=noise_origin(config, party),
            exchange=plugins.exchange(config.protocol),
        )
        nodes.append(
            Node(role, run_id="served-1", max_message_bytes=config.transport.max_message_bytes, parties=parties)
        )
    run_inprocess(nodes)
    folder = tmp_path / "parties"
    for node in nodes:
        write_json(
            folder / f"{node.party_id}.json",
            party_report(node, role_name=node.role.role_name, wall_s=1.0, driver={}, scenario=scenario),
        )
    report = assemble_from_party_reports(scenario, folder, tmp_path / "run", driver="market")
    assert json.loads((tmp_path / "run" / "report.json").read_text())["status"] == report["status"]
    return report


def check_common(report: dict, protocol: str) -> None:
    """What every report of a schema-only marketplace holds: it validates, its data section is the
    schema with no row counts, ``references_absent`` names data.rows and every figure absent in
    place, and the terminal tables render and say what is not computed."""
    assert report["status"] == "completed", report["failures"]
    assert report_problems(json.loads(json.dumps(report))) == []
    data = report["data"]
    assert [f["name"] for f in data["features"]] == [f"x{i}" for i in range(DIM)]
    assert data["features"][0] == {"name": "x0", "lower": -12.0, "upper": 12.0}
    assert not {"owners", "validation", "test", "seed_set"} & set(data)
    assert is_absent(data["rows"])
    missing = report[REFERENCES_ABSENT]
    assert missing["data.rows"] == data["rows"]["absent"]
    for path, why in missing.items():
        assert why and isinstance(why, str), path
    console = Console(width=200, record=True)
    for table in summary_tables(report):
        console.print(table)
    text = console.export_text()
    assert "not computed" in text and "references_absent" in text
    assert absent_line(report).startswith(", ".join(list(missing)[:3]))


def test_a_share_of_a_schema_world_holds_no_rows_and_says_it_is_not_central():
    config = market("summarize", {"rounds": 3}).config
    world = make_world(config, plugins.exchange(config.protocol))
    for party in party_ids(config):
        share = share_of(world, party)
        assert not share.central
        assert sum(len(o) for o in share.owners) == len(share.validation) == len(share.test) == 0


def test_the_data_section_of_a_schema_world_is_the_schema_and_no_row_counts():
    config = Scenario.from_dict(
        {
            "name": "g",
            "protocol": "summarize",
            "parties": {"owners": 2},
            "data": {"schema": {**schema(("no", "yes")), "group": {"name": "site", "values": ["a", "b"]}}},
        }
    ).config
    section = data_section(config, make_world(config, plugins.exchange(config.protocol)))
    assert section["label"] == {"name": "label", "classes": ["no", "yes"]}
    assert section["group"] == {"name": "site", "values": ["a", "b"]}
    assert section["group_names"] == ["a", "b"] and section["dim"] == DIM
    assert is_absent(section["rows"]) and "data.schema" in section["rows"]["absent"]
    assert "owners" not in section


# --- summarize ---------------------------------------------------------------------------------


@pytest.mark.parametrize("section", [{}, {"curator": "less_trusted"}], ids=["trusted", "less-trusted"])
def test_summarize_reports_the_consumers_own_figures_and_states_its_references_absent(tmp_path, section):
    scenario = market("summarize", {"rounds": 5, "features": 60, "gamma": 0.1, **section})
    report = served_run(scenario, party_files(tmp_path, scenario), tmp_path)
    check_common(report, "summarize")
    consumer = report["party_details"]["consumer"]["result"]
    metrics = report["metrics"]
    assert {k: metrics[k] for k in ("mmd2", "accuracy", "mmd2_with_seed_set")} == consumer["metrics"]
    assert metrics["mmd2"] > 0 and 0 <= metrics["accuracy"] <= 1 and "consumer" in metrics["measured_by"]
    assert set(report[REFERENCES_ABSENT]) == {"metrics.baselines", "checks.central_replay", "data.rows"}
    assert metrics["baselines"] == {"absent": report[REFERENCES_ABSENT]["metrics.baselines"]}
    assert report["checks"]["central_replay"] == {
        "applicable": False,
        "reason": report[REFERENCES_ABSENT]["checks.central_replay"],
    }
    by_round = [r["mmd2"] for r in report["history"]["rounds"]]  # the consumer's, from the summary in order
    assert len(by_round) == len(report["selection"]) == 5
    assert by_round == consumer["own_evaluation"]["mmd2_by_round"]
    assert by_round[-1] == pytest.approx(metrics["mmd2"], rel=1e-9)
    assert "computed by the consumer" in report["history"]["about"]["mmd2"]
    from marketplace import Report

    assert Report.load(tmp_path / "run").references_absent == report[REFERENCES_ABSENT]


def test_a_private_summarize_report_states_the_non_private_greedy_and_its_comparisons_absent(tmp_path):
    scenario = market("summarize", {"rounds": 4, "features": 60, "gamma": 0.1, "privacy": {"enabled": True}})
    report = served_run(scenario, party_files(tmp_path, scenario), tmp_path)
    check_common(report, "summarize")
    missing = report[REFERENCES_ABSENT]
    assert "non-private greedy" in missing["metrics.baselines"]
    assert {
        "metrics.mmd2_with_seed_set_increase_over_greedy_pct",
        "metrics.mmd2_alone_increase_over_greedy_pct",
    } <= set(missing)
    assert "mmd2_with_seed_set_increase_over_greedy_pct" not in report["metrics"]
    assert report["metrics"]["mmd2"] is not None
    replay = report["checks"]["central_replay"]
    assert replay["applicable"] is False and "private" in replay["reason"]  # not applicable, rows or not
    assert "checks.central_replay" not in missing


def test_a_summarize_consumer_without_a_test_set_has_no_accuracy_and_says_why(tmp_path):
    scenario = market("summarize", {"rounds": 3, "features": 60, "gamma": 0.1})
    report = served_run(scenario, party_files(tmp_path, scenario, test=False), tmp_path)
    check_common(report, "summarize")
    assert report["metrics"]["accuracy"] is None and report["metrics"]["mmd2"] is not None
    assert "no test set" in report[REFERENCES_ABSENT]["metrics.accuracy"]


# --- sketch ------------------------------------------------------------------------------------


def test_sketch_public_defaults_fill_the_box_from_the_schema_ranges_and_keep_a_given_one():
    from marketplace.data.public_schema import DataSchema
    from marketplace.protocols.sketch.exchange import public_defaults
    from marketplace.schema import build

    raw = {
        "features": [{"name": "a", "lower": -1, "upper": 2}, {"name": "b", "lower": 0, "upper": 5}],
        "label": {"classes": [0, 1]},
    }
    parsed = build(DataSchema, raw)
    request = {"epsilon": 0.5, "lower": []}
    for schema in (parsed, raw):  # the parsed schema, or its raw mapping
        filled = public_defaults(request, schema)
        assert filled == {"epsilon": 0.5, "lower": [-1.0, 0.0], "upper": [2.0, 5.0]}
    assert request == {"epsilon": 0.5, "lower": []}  # the request's section is not changed
    assert public_defaults(None, parsed) == {"lower": [-1.0, 0.0], "upper": [2.0, 5.0]}
    given = {"lower": [0, 0], "upper": [1, 1]}
    assert public_defaults(given, parsed) == given


@pytest.mark.parametrize("test_set", [True, False], ids=["with-test-set", "no-test-set"])
def test_sketch_reports_the_consumers_own_figures_and_states_the_truth_absent(tmp_path, test_set):
    from marketplace.protocols.sketch.exchange import public_defaults

    section = public_defaults(
        {
            "samples": 2000,
            "include_label": True,
            "map": {"features": 60},  # the request's, no box
            "queries": {"logistic_regression": True, "random_counts": 3},
        },
        schema((0, 1)),
    )
    scenario = market("sketch", section, classes=(0, 1))
    assert scenario.config.sketch.lower == (-12.0,) * DIM and scenario.config.sketch.upper == (12.0,) * DIM
    report = served_run(scenario, party_files(tmp_path, scenario, classes=(0, 1), test=test_set), tmp_path)
    check_common(report, "sketch")
    own = report["party_details"]["consumer"]["result"]["own_evaluation"]
    metrics, missing = report["metrics"], report[REFERENCES_ABSENT]
    assert {"truth", "metrics.errors", "ranking.check", "metrics.logistic_baselines", "data.rows"} <= set(missing)
    assert report["truth"] == {"absent": missing["truth"]} and metrics["errors"] == {
        "absent": missing["metrics.errors"]
    }
    assert metrics["logistic_baselines"] == {"absent": missing["metrics.logistic_baselines"]}
    assert report["ranking"]["order"] and report["ranking"]["check"] == {"absent": missing["ranking.check"]}
    assert metrics["merged_mmd2"] == own["merged_mmd2"] is not None
    assert metrics["target_gap"] == own["target_gap"] and {"moment1_mre", "cdf_mae"} <= set(metrics["target_gap"])
    assert "count_total_rel" not in metrics["target_gap"]  # the consumer's row count never leaves it
    if test_set:
        assert 0 <= metrics["logistic_auc"] <= 1 and "metrics.logistic_auc" not in missing
    else:
        assert metrics["logistic_auc"] is None and "no test set" in missing["metrics.logistic_auc"]


def test_sketch_checks_a_schema_world_against_the_schema():
    from marketplace.protocols.sketch.exchange import check_world

    box = {"lower": [-12] * DIM, "upper": [12] * DIM}
    config = market("sketch", {**box, "include_label": True}).config  # classes 0..5
    with pytest.raises(ValueError, match=r"^sketch.include_label: the schema's classes are not 0/1"):
        check_world(config, make_world(config, plugins.exchange(config.protocol)))
    config = market("sketch", {"lower": [-6] * DIM, "upper": [12] * DIM, "clip": False}).config
    with pytest.raises(ValueError, match=r"^sketch.clip: .*x0, x1, x2, x3 reach outside the box"):
        check_world(config, make_world(config, plugins.exchange(config.protocol)))
    config = market("sketch", {**box, "clip": False}).config
    check_world(config, make_world(config, plugins.exchange(config.protocol)))


# --- stc ---------------------------------------------------------------------------------------

STC = {"k": 3, "domain": {"low": [-12], "high": [12]}}


@pytest.mark.parametrize("release", ["nna", "nas"])
def test_stc_reports_the_consumers_own_costs_and_states_those_needing_the_true_source_absent(tmp_path, release):
    scenario = market("stc", {**STC, "release": release, "t": 20})
    report = served_run(scenario, party_files(tmp_path, scenario), tmp_path)
    check_common(report, "stc")
    consumer = report["party_details"]["consumer"]["result"]
    metrics, missing = report["metrics"], report[REFERENCES_ABSENT]
    assert set(missing) == {"metrics.cost", "metrics.source_size", "metrics.baselines", "data.rows"}
    assert metrics["cost"] is None and metrics["source_size"] is None
    assert metrics["baselines"] == {"absent": missing["metrics.baselines"]}
    assert metrics["target_size"] == consumer["target_size"] == 60 and metrics["k"] == 3
    assert metrics["estimated_cost"] == consumer["choice"]["estimated_cost"] > 0
    own = consumer["own_evaluation"]
    assert metrics["released_only_cost"] == own["released_only_cost"] > 0
    assert metrics["chosen_only_cost"] == own["chosen_only_cost"] > 0
    assert metrics["estimated_cost"] <= min(own["released_only_cost"], own["chosen_only_cost"]) + 1e-12
    assert len(report["choice"]) == 3


def test_stc_nas_is_checked_by_each_owner_on_its_own_rows_when_the_world_holds_none(tmp_path):
    from marketplace.runtime import prepare_world

    scenario = market("stc", {**STC, "release": "nas", "t": 150})
    prepare_world(scenario, plugins.exchange(scenario.config.protocol))  # nobody's rows to count here: no refusal
    config = scenario.config
    files = party_files(tmp_path, scenario, rows=100)
    own = own_rows(config, "owner-2", **files["owner-2"])
    with pytest.raises(ValueError, match=r"^owner-2: stc.t = 150: NAS averages .* owner-2 holds 100 rows"):
        build_role(
            config,
            "owner-2",
            world=share_of(make_world(config, plugins.exchange(config.protocol)), "owner-2"),
            owner_data=own["owner"],
            exchange=plugins.exchange(config.protocol),
        )


def test_stc_public_defaults_fill_the_domain_from_the_schema_ranges_and_keep_a_given_one():
    from marketplace.protocols.stc.exchange import public_defaults, scaling_of

    raw = {
        "features": [{"name": "a", "lower": -1, "upper": 2}, {"name": "b", "lower": 0, "upper": 5}],
        "label": {"classes": [0, 1]},
    }
    request = {"k": 4, "domain": None}
    assert public_defaults(request, raw) == {"k": 4, "domain": {"low": [-1.0, 0.0], "high": [2.0, 5.0]}}
    assert request == {"k": 4, "domain": None}
    given = {"domain": {"low": [0], "high": [9]}}
    assert public_defaults(given, raw) == given
    scenario = market("stc", public_defaults({"k": 2}, schema()))  # the whole way: parsed, and a scaling made from it
    assert scenario.config.stc.domain.low == (-12.0,) * DIM
    assert scaling_of(scenario.config, DIM).bound == pytest.approx(24.0)


# --- pfds --------------------------------------------------------------------------------------


def test_pfds_is_refused_on_a_schema_only_marketplace_naming_data_schema():
    from marketplace.scenario import ScenarioError

    with pytest.raises(
        ScenarioError,
        match=r"data.schema: expected a table source instead \(data.source.kind: table\) "
        r"for protocol pfds",
    ) as refused:
        market("pfds", {})
    assert refused.value.path == "data.schema"
