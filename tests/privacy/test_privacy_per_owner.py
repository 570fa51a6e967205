"""The per-owner privacy section and table: what each owner gave up, to whom, under which ledgers,
and what nothing protects; identical owners collapse into one row; bad data never breaks the display."""

from __future__ import annotations

import copy
import io
import re

import pytest
from conftest import ROOT
from rich.console import Console

from marketplace.reporting.per_owner import Exposure, owner_ranges, per_owner_section, per_owner_table
from marketplace.runner.display import summary_tables
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario, parse_scenario

TRANSPORT = {"heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 5.0, "start_timeout_s": 30.0}


def words(*tables) -> str:
    console = Console(file=io.StringIO(), width=1000, color_system=None)
    for table in tables:
        console.print(table)
    return " ".join(re.sub("[│┃║]", " ", console.file.getvalue()).split())


def observers(group: dict) -> dict[str, dict]:
    return {o["observer"]: o for o in group["observers"]}


@pytest.fixture(scope="module")
def summarize_private(tmp_path_factory):
    loaded = load_scenario(ROOT / "scenarios" / "quickstart-private.yaml", ["summarize.rounds=5"])
    return run_scenario(loaded, tmp_path_factory.mktemp("po") / "run", driver="inprocess")


def test_summarize_private_run_says_what_each_observer_gets(summarize_private):
    report = summarize_private
    [group] = report["privacy_per_owner"]["groups"]  # every owner is in the same position
    assert group["owners"] == [f"owner-{i}" for i in range(1, 5)] and group["label"] == "owner-1..owner-4"
    seen = observers(group)
    assert list(seen) == ["consumer", "curator", "other owners"]
    # the consumer gets the owner's points that enter D_s in the clear; no ledger covers that
    assert seen["consumer"]["ledgers"] == [] and "in the clear" in seen["consumer"]["sees"]
    assert any("not private" in t for t in seen["consumer"]["not_protected"])
    # the curator is trusted
    assert seen["curator"]["ledgers"] == [] and any("trusted" in t for t in seen["curator"]["not_protected"])
    # the other owners: every ledger of the run but the consumer's D_v, with the ledger's own figures
    others = {entry["ledger"]: entry for entry in seen["other owners"]["ledgers"]}
    expected = {n for n, e in report["privacy"].items() if "eps" in e} - {"consumer:D_v"}
    assert set(others) == expected and {"D_s", "auction"} <= expected
    for name, entry in others.items():
        ledger = report["privacy"][name]
        assert (entry["eps"], entry["delta"], entry["accountant"]) == (
            ledger["eps"],
            ledger["delta"],
            ledger["accountant"],
        )
        assert entry["neighbouring"] == ledger["neighbouring"]
    assert any("end to end" in t for t in seen["other owners"]["not_protected"])

    text = words(*summary_tables(report))
    assert "what each owner gave up, and to whom" in text and "owner-1..owner-4" in text
    for name, entry in others.items():
        assert f"{name}: eps = {entry['eps']:.4g}, delta = {entry['delta']:.4g} ({entry['accountant']};" in text


def test_summarize_non_private_run_lists_nothing_as_protected(tmp_path):
    report = run_scenario(
        load_scenario(ROOT / "scenarios" / "quickstart.yaml", ["summarize.rounds=3"]),
        tmp_path / "run",
        driver="inprocess",
    )
    [group] = report["privacy_per_owner"]["groups"]
    for observer in group["observers"]:
        assert observer["ledgers"] == [], observer["observer"]
    assert any("non-private protocol" in t for t in observers(group)["other owners"]["not_protected"])


def test_sketch_run_bounds_consumer_and_curator_by_the_owners_ledger(tmp_path):
    report = run_scenario(
        load_scenario(ROOT / "scenarios" / "sketch-quickstart.yaml", []), tmp_path / "run", driver="inprocess"
    )
    [group] = report["privacy_per_owner"]["groups"]
    assert group["owners"] == [f"owner-{i}" for i in range(1, 5)]
    seen = observers(group)
    for who in ("consumer", "curator"):
        [entry] = seen[who]["ledgers"]
        assert entry["ledger"] == "<owner>"
        assert entry["neighbouring"]["record"] == "a row of <owner>'s data"
        for owner in group["owners"]:
            assert (
                report["privacy"][owner]["eps"] == entry["eps"] and report["privacy"][owner]["delta"] == entry["delta"]
            )
            assert report["privacy"][owner]["accountant"] == entry["accountant"]
    assert seen["other owners"]["ledgers"] == [] and seen["other owners"]["sees"].startswith("nothing")
    assert "owner-1..owner-4" in words(*summary_tables(report))


def test_a_non_private_sketch_says_the_release_is_not_protected(tmp_path):
    report = run_scenario(
        load_scenario(ROOT / "scenarios" / "sketch-quickstart.yaml", ["sketch.epsilon=null"]),
        tmp_path / "run",
        driver="inprocess",
    )
    seen = observers(report["privacy_per_owner"]["groups"][0])
    assert seen["consumer"]["ledgers"] == []
    assert any("not private" in t for t in seen["consumer"]["not_protected"])


@pytest.fixture
def stc_tiny() -> dict:
    return {
        "name": "stc-tiny",
        "protocol": "stc",
        "seed": 5,
        "parties": {"owners": 3},
        "data": {
            "source": {"kind": "stc_synthetic", "stc_synthetic": {"which": 2, "n_source": 400, "n_target": 300}},
            "partition": {"scheme": "even", "groups": [0]},
            "consumer": {"target_groups": [1], "target_share": 0.99, "validation_size": 280, "test_size": 5},
            "seed_set": {"size": 0},
        },
        "stc": {
            "release": "nna",
            "k": 6,
            "domain": {"low": [0.0], "high": [1.0]},
            "privacy": {"notion": "zcdp", "rho": 0.5},
        },
        "transport": TRANSPORT,
    }


def test_stc_run_bounds_consumer_and_curator_by_the_owners_ledger(tmp_path, stc_tiny):
    report = run_scenario(parse_scenario(stc_tiny, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess")
    [group] = report["privacy_per_owner"]["groups"]
    assert group["label"] == "owner-1..owner-3"
    seen = observers(group)
    for who in ("consumer", "curator"):
        [entry] = seen[who]["ledgers"]
        assert entry["ledger"] == "<owner>" and entry["eps"] == report["privacy"]["owner-2"]["eps"]
        assert entry["accountant"] == report["privacy"]["owner-2"]["accountant"]
    assert seen["other owners"]["ledgers"] == []
    text = words(*summary_tables(report))
    assert f"<owner>: eps = {report['privacy']['owner-1']['eps']:.4g}" in text


def test_a_single_owner_has_no_row_for_other_owners(tmp_path, stc_tiny):
    stc_tiny["parties"]["owners"] = 1
    report = run_scenario(parse_scenario(stc_tiny, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess")
    [group] = report["privacy_per_owner"]["groups"]
    assert list(observers(group)) == ["consumer", "curator"]


# --- the section from ledgers alone ------------------------------------------------------------------


def own_ledger(owner: str, eps: float = 1.0, **extra) -> dict:
    return {
        "dataset": owner,
        "eps": eps,
        "delta": 0.0,
        "accountant": "basic composition",
        "neighbouring": {"relation": "add/remove-one", "record": f"a row of {owner}'s data"},
        **extra,
    }


def sketch_like(owners: list[str]) -> dict[str, list[Exposure]]:
    return {
        o: [
            Exposure("consumer", "this owner's release", (o,)),
            Exposure("curator", "this owner's release", (o,)),
            Exposure("other owners", "nothing"),
        ]
        for o in owners
    }


def test_many_owners_in_the_same_position_collapse_into_one_row():
    owners = [f"owner-{i}" for i in range(1, 65)]
    section = per_owner_section(owners, sketch_like(owners), {o: own_ledger(o) for o in owners})
    [group] = section["groups"]
    assert group["owners"] == owners and group["label"] == "owner-1..owner-64"
    text = words(per_owner_table(section))
    assert text.count("owner-1..owner-64") == 1 and text.count("<owner>: eps = 1") == 2  # consumer and curator


def test_an_owner_in_another_position_gets_its_own_row():
    owners = [f"owner-{i}" for i in range(1, 65)]
    privacy = {o: own_ledger(o) for o in owners} | {"owner-12": own_ledger("owner-12", eps=0.5)}
    groups = per_owner_section(owners, sketch_like(owners), privacy)["groups"]
    assert [g["label"] for g in groups] == ["owner-1..owner-11, owner-13..owner-64", "owner-12"]
    # owner-1's id is not mistaken for the start of owner-12's
    assert groups[1]["observers"][0]["ledgers"][0]["neighbouring"]["record"] == "a row of <owner>'s data"


def test_the_table_shows_a_bounded_number_of_groups():
    owners = [f"owner-{i}" for i in range(1, 41)]
    privacy = {o: own_ledger(o, eps=float(i + 1)) for i, o in enumerate(owners)}  # every owner its own row
    section = per_owner_section(owners, sketch_like(owners), privacy)
    assert len(section["groups"]) == 40
    text = words(per_owner_table(section))
    assert "owner-12 consumer" in text and "owner-13 consumer" not in text
    assert "28 more groups (28 owners) in report.json (privacy_per_owner)" in text


def test_owner_ranges():
    assert (
        owner_ranges(["owner-3", "owner-1", "owner-2", "owner-7", "owner-9", "owner-10"])
        == "owner-1..owner-3, owner-7, owner-9..owner-10"
    )
    assert owner_ranges([]) == ""


def test_a_ledgers_noise_field_is_shown_when_present():
    owners = ["owner-1", "owner-2"]
    noise = {
        "origin": "seed",
        "source": "the run seed",
        "who_can_strip": "anyone who knows the run seed: every party of this run",
    }
    privacy = {o: own_ledger(o, noise=noise) for o in owners}
    section = per_owner_section(owners, sketch_like(owners), privacy)
    assert section["groups"][0]["observers"][0]["ledgers"][0]["noise"] == noise
    assert "noise strippable by: every party of the run (seed-derived)" in words(per_owner_table(section))
    keyed = {
        o: own_ledger(
            o,
            noise={
                "origin": "key",
                "source": f"the run seed and {o}'s noise key",
                "key_file": f"/kits/{o}/{o}.noise_key",
                "who_can_strip": f"only whoever can read {o}'s noise key file (/kits/{o}/{o}.noise_key)",
            },
        )
        for o in owners
    }
    text = words(per_owner_table(per_owner_section(owners, sketch_like(owners), keyed)))
    assert "noise strippable by: only the holder of <owner>.noise_key" in text
    assert "noise" not in words(
        per_owner_table(per_owner_section(owners, sketch_like(owners), {o: own_ledger(o) for o in owners}))
    )


def test_missing_and_empty_ledgers_are_stated_not_dropped():
    owners = ["owner-1", "owner-2"]
    privacy = {
        "owner-1": {"eps": None, "note": "no release recorded (dropped out or failed)"},
        "owner-2": {"guarantee": "none", "note": "exact sums were released"},
    }
    section = per_owner_section(owners + ["owner-3"], sketch_like(owners + ["owner-3"]), privacy)
    by_owner = {tuple(g["owners"]): observers(g) for g in section["groups"]}
    assert by_owner[("owner-1",)]["consumer"]["ledgers"][0]["note"].startswith("no release recorded")
    assert by_owner[("owner-2",)]["consumer"]["not_protected"] == ["<owner>: exact sums were released"]
    assert by_owner[("owner-3",)]["consumer"]["not_protected"] == ["<owner>: no ledger in the report"]
    text = words(per_owner_table(section))
    assert "<owner>: no figure (no release recorded" in text and "no ledger in the report" in text


@pytest.mark.parametrize(
    "section, shown",
    [
        (None, "unreadable"),
        ({}, "unreadable"),
        ({"groups": None}, "unreadable"),
        ({"groups": [None]}, "unreadable"),
        ({"groups": [{"label": "owner-1"}]}, "unreadable"),
        ({"groups": [{"label": "o", "observers": [None]}]}, "unreadable"),
        ({"groups": []}, "no owner in this run"),
        (
            {
                "groups": [
                    {
                        "label": "o",
                        "observers": [
                            {
                                "observer": "consumer",
                                "ledgers": ["D_s", {"ledger": "x", "eps": 1.0, "neighbouring": "replace"}],
                            }
                        ],
                    }
                ]
            },
            "unreadable ledger entry: 'D_s'|x: eps = 1, delta = - (accountant not stated; relation not stated: -)",
        ),
        ({"groups": [], "unavailable": "KeyError: 'privacy'"}, "not available: KeyError: 'privacy'"),
    ],
)
def test_bad_or_missing_data_does_not_break_the_table(section, shown):
    text = words(per_owner_table(section))
    assert "what each owner gave up" in text
    for fragment in shown.split("|"):
        assert fragment in text


def test_pfds_sharers_are_seen_by_everyone_and_receivers_give_nothing(tmp_path):
    raw = {
        "name": "pfds-tiny",
        "protocol": "pfds",
        "seed": 4,
        "parties": {"owners": 3},
        "data": {"source": {"kind": "table", "table": {"dataset": "synthetic", "synthetic": {"rows": 900}}}},
        "pfds": {"epsilon": 1.0, "h_max": 5, "folds": 5, "max_leaves": 256, "sharers": 2},
        "transport": TRANSPORT,
    }
    report = run_scenario(parse_scenario(raw, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess")
    groups = {owner: g for g in report["privacy_per_owner"]["groups"] for owner in g["owners"]}
    for who, seen in observers(groups["owner-1"]).items():  # a receiver
        assert seen["ledgers"] == [] and seen["sees"].startswith("nothing derived"), who
    for sharer in ("owner-2", "owner-3"):
        seen = observers(groups[sharer])
        assert list(seen) == ["consumer", "curator", "other owners"]
        for who, entry in seen.items():
            [ledger] = entry["ledgers"]
            assert ledger["ledger"] == "<owner>" and ledger["eps"] == report["privacy"][sharer]["eps"], who


def test_a_report_with_a_broken_section_still_prints(summarize_private):
    report = copy.deepcopy(summarize_private)
    report["privacy_per_owner"] = {"groups": [{"observers": "not a list"}]}
    assert "unreadable" in words(*summary_tables(report))
    del report["privacy_per_owner"]  # an older report: no per-owner table, nothing else changes
    assert "what each owner gave up" not in words(*summary_tables(report))
