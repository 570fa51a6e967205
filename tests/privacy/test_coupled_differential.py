"""The coupled differential test (marketplace.differential) for the four shipped protocols, in sessions
shaped as deployments: each party holds only its own rows, and the consumer is handed the run report
assembled from what each party publishes. (The same test on a simulated run, ``marketplace run``'s
world, is the conformance check ``coupled_differential`` of tests/runtime/test_conformance.py.)

owner-1's file and a neighbour of it under the protocol's relation give, with every release's output
coupled, the same value in every field the curator, the consumer and the other owners receive, but
for the fields the protocol declares disclosures; and every field they receive is declared.
"""

from __future__ import annotations

import pytest
from conftest import ROOT
from test_what_leaves_an_owner import SECTIONS, market, party_files

import marketplace
from marketplace import plugins
from marketplace.differential import CHANGED, coupled_problems, holding, run_shares
from marketplace.parties import make_world, own_rows, party_ids, share_of, with_own_rows
from marketplace.privacy.view import Seen

PRIVATE_SUMMARIZE = SECTIONS["summarize"] | {"rounds": 6, "privacy": {"enabled": True, "eps_auction": 0.05, "tau": 2}}


def own_shares(scenario, folder):
    """Each party's share of a marketplace described by its public schema: its own rows, from its files."""
    config = scenario.config
    files = party_files(folder)
    world = make_world(config)
    shares = {}
    for party in party_ids(config):
        own = own_rows(config, party, **files.get(party, {}))
        shares[party] = with_own_rows(share_of(world, party), own)
        if "owner" in own:
            shares[party] = holding(shares[party], party, own["owner"])
    return shares


def problems(scenario, shares, *, served: bool) -> list[str]:
    exchange = plugins.exchange(scenario.config.protocol)
    view = exchange.declared_view(scenario.config)
    assert view is not None, f"{scenario.config.protocol} declares no view"
    plan = exchange.release_plan(scenario.config, CHANGED)
    assert plan is not None
    return coupled_problems(scenario, shares, view, served=served, relation=plan.relation)


@pytest.mark.parametrize(
    ("protocol", "section"),
    [pytest.param(p, SECTIONS[p], id=p) for p in sorted(SECTIONS)]
    + [pytest.param("summarize", PRIVATE_SUMMARIZE, id="summarize-private")],
)
def test_a_served_session_keeps_its_declared_view(protocol, section, tmp_path):
    scenario = market(protocol, section)
    assert problems(scenario, own_shares(scenario, tmp_path), served=True) == []


def test_an_assembled_pfds_session_keeps_its_declared_view():
    """pfds learns from a table that it cuts into the owners' shares (it is not served from a public
    schema): parties that run on their own for ``marketplace assemble``, the consumer handed the report."""
    scenario = marketplace.load(
        ROOT / "scenarios" / "pfds-synthetic.yaml", sets=["parties.owners=4", "data.source.table.synthetic.rows=2000"]
    )
    assert problems(scenario, run_shares(scenario), served=True) == []


def test_every_shipped_protocol_declares_its_view():
    for name in ("pfds", "sketch", "stc", "summarize"):
        scenario = market(name, SECTIONS.get(name, {})) if name != "pfds" else None
        config = (
            scenario.config
            if scenario is not None
            else marketplace.load(ROOT / "scenarios" / "pfds-synthetic.yaml").config
        )
        view = plugins.exchange(name).declared_view(config)
        assert view and all(isinstance(seen, Seen) for seen in view), name
