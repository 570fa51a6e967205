"""What an owner publishes of its failure: the failure's category in fixed words, or an internal error's
kind and the phase it happened in, never the text, which can hold a value of the owner's; the whole
text stays in its own report (and, in a simulation, in the simulator's view)."""

from __future__ import annotations

import json

import pytest

from marketplace import plugins
from marketplace.parties import party_ids
from marketplace.runtime.assemble import assemble_from_reports
from marketplace.runtime.party_process import host_nodes
from marketplace.runtime.party_reports import party_report
from marketplace.runtime.publication import UNLISTED_FAILURE, internal_failure, public_failure
from marketplace.scenario import Scenario
from marketplace.transport.inprocess import run_inprocess

SECRET = "41.7316529"

SCENARIO = {
    "name": "failures",
    "protocol": "sketch",
    "seed": 3,
    "parties": {"owners": 3},
    "data": {
        "source": {
            "kind": "covariate_shift",
            "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 200},
        },
        "partition": {"scheme": "by_group", "skew": 0.8},
        "consumer": {"target_groups": [0], "validation_size": 20, "test_size": 20},
        "seed_set": {"size": 0},
    },
    "sketch": {"lower": [-12] * 3, "upper": [12] * 3, "epsilon": 1.0, "samples": 300, "map": {"features": 20}},
}


@pytest.mark.parametrize(
    ("failure", "public"),
    [
        (
            f"internal error in its agent while handling a message: ValueError: row 17 holds {SECRET}",
            "internal error (ValueError) in its agent while handling a message",
        ),
        (
            'internal error: Traceback (most recent call last):\n  File "owner.py", line 3, in f\n'
            f"    raise KeyError(row)\nKeyError: 'row {SECRET}'",
            "internal error (KeyError)",
        ),
        (
            f'internal error in its owner host: Traceback (most recent call last):\n  File "x.py", line 9\n'
            f"    g()\nmarketplace.data.own_files.OwnDataError: /home/ann/owner-2.csv: line 6 holds {SECRET}",
            "internal error (marketplace.data.own_files.OwnDataError) in its owner host",
        ),
        (
            f"internal error in its agent while finishing: {SECRET}: not a type",
            "internal error in its agent while finishing",
        ),
        ("run timeout: 600 s elapsed", "run timeout: 600 s elapsed"),
        (
            "lost contact with curator (its connection closed: no answer to ZeroMQ heartbeats within "
            "heartbeat_timeout_s=5 (a stopped or dead process, or a broken network))",
            "lost contact with curator (its connection closed)",
        ),
        (
            "lost contact with curator (no sketch request within progress_timeout_s=30)",
            "lost contact with curator (no progress within its deadline)",
        ),
        (
            f"the curator ended the run as failed for this party: round 3: bid {SECRET} does not match",
            "the curator ended the run as failed for this party (the curator's report says why)",
        ),
        (f"curator refused our hello: config {SECRET}", "curator refused our hello"),
        (
            "the curator at tcp://10.0.0.1:7700 refused this party's CURVE key: owner-1's public key is not in the "
            "curator's kit. Check the keys folder /home/ann/kit",
            "the curator refused this party's CURVE key",
        ),
        ("the owner's agent was stopped", "the owner's agent was stopped"),
        ("the session ran longer than 14400 s", "the session ran longer than 14400 s"),
        (f"stc.t = 5 exceeds this owner's number of source rows ({SECRET})", UNLISTED_FAILURE),
        (f"lost contact with {SECRET}", UNLISTED_FAILURE),
    ],
)
def test_an_owner_publishes_a_failure_by_its_category_and_publishing_twice_changes_nothing(failure, public):
    assert public_failure(failure) == public
    assert public_failure(public) == public  # the assembler publishes what a party handed over again
    assert SECRET not in public


def test_an_internal_error_names_where_and_in_which_phase_it_happened():
    failure = internal_failure(ValueError(f"row 17 holds {SECRET}"), where="agent", phase="keeping time")
    assert failure == f"internal error in its agent while keeping time: ValueError: row 17 holds {SECRET}"
    assert public_failure(failure) == "internal error (ValueError) in its agent while keeping time"


def test_a_failed_owners_report_publishes_the_declared_text_and_keeps_the_whole_to_itself():
    scenario = Scenario.from_dict(SCENARIO)
    nodes = host_nodes(
        scenario, party_ids(scenario.config), run_id="r-1", exchange=plugins.exchange(scenario.config.protocol)
    )
    run_inprocess(nodes)
    owner = next(node for node in nodes if node.party_id == "owner-2")
    owner.role.fail(internal_failure(ValueError(f"row 17 holds {SECRET}"), where="agent", phase="finishing"))
    handed = {
        node.party_id: json.loads(
            json.dumps(party_report(node, role_name=node.role.role_name, wall_s=1.0, driver={}, scenario=scenario))
        )
        for node in nodes
    }
    assert handed["owner-2"]["status"] == "failed"
    assert handed["owner-2"]["failure"] == "internal error (ValueError) in its agent while finishing"
    assert SECRET not in json.dumps(handed)
    report = assemble_from_reports(
        scenario, handed, {}, driver="market", exchange=plugins.exchange(scenario.config.protocol)
    )
    assert "owner-2: internal error (ValueError) in its agent while finishing" in report["failures"]
    assert SECRET not in json.dumps(report)
    own = party_report(owner, role_name="owner", wall_s=1.0, driver={}, scenario=scenario, own=True)
    assert own["failure"] == handed["owner-2"]["failure"] and SECRET in own["own"]["failure"]
    handed_more = assemble_from_reports(
        scenario, handed | {"owner-2": own}, {}, driver="market", exchange=plugins.exchange(scenario.config.protocol)
    )
    assert SECRET not in json.dumps(handed_more)  # a deployment's report, whatever a party handed over
