"""Each distinct request's scenario parsed once, its text written once: a later session of the same
request gets exactly what parsing (and writing) its own would have given, its own request id included."""

from __future__ import annotations

import yaml
from test_serve import MARKET, REQUEST

from marketplace.scenario import Scenario
from marketplace.service.sessions import prepare_request, session_scenario
from marketplace.service.worlds import ScenarioTexts, SessionScenarios, WorldCache, session_key

OWNERS = [f"owner-{i + 1}" for i in range(MARKET["parties"]["owners"])]


def market() -> Scenario:
    return Scenario.from_yaml(yaml.safe_dump(MARKET), source="the test's marketplace")


def test_the_server_parses_a_consumers_request_once_and_each_session_has_its_own_request_id():
    parsed, worlds, text = SessionScenarios(), WorldCache(), yaml.safe_dump(REQUEST)
    for session in ("s0001-aaaaaaaa", "s0002-bbbbbbbb", "s0003-cccccccc"):
        kept = prepare_request(market(), text, session, "alice", OWNERS, worlds.get, parsed)
        fresh = prepare_request(market(), text, session, "alice", OWNERS, worlds.get)
        assert not isinstance(kept, str) and not isinstance(fresh, str)
        assert kept[0].config == fresh[0].config and kept[0].raw == fresh[0].raw and kept[1] == fresh[1]
        assert kept[0].config.lifetime.request_id == session
    assert parsed.parsed == 1
    other = prepare_request(market(), text, "s0004-dddddddd", "bob", OWNERS, worlds.get, parsed)
    assert not isinstance(other, str) and other[0].config.lifetime.consumer == "bob" and parsed.parsed == 2


def test_an_agent_parses_a_request_once_and_a_text_naming_its_session_elsewhere_on_its_own():
    parsed = SessionScenarios()
    for session in ("s0001-aaaaaaaa", "s0002-bbbbbbbb"):
        text = session_scenario(market(), yaml.safe_dump(REQUEST), session=session, consumer="alice").dump_yaml()
        key = session_key(text, session)
        assert key is not None and session not in key
        scenario = parsed.get(key, session, lambda text=text, session=session: Scenario.from_yaml(text, source=session))
        own = Scenario.from_yaml(text, source=session)
        assert scenario.config == own.config and scenario.raw == own.raw and scenario.source == session
    assert parsed.parsed == 1
    named = dict(REQUEST, description="asked as s0003-cccccccc")
    text = session_scenario(market(), yaml.safe_dump(named), session="s0003-cccccccc", consumer="alice").dump_yaml()
    assert session_key(text, "s0003-cccccccc") is None


def test_a_sessions_text_is_the_one_its_scenario_writes():
    texts = ScenarioTexts()
    for session in ("s0001-aaaaaaaa", "s0002-bbbbbbbb", "s0003-cccccccc"):
        scenario = session_scenario(market(), yaml.safe_dump(REQUEST), session=session, consumer="alice")
        assert texts.text(scenario) == scenario.dump_yaml()
    assert texts.written == 1
    bob = session_scenario(market(), yaml.safe_dump(REQUEST), session="s0004-dddddddd", consumer="bob")
    assert texts.text(bob) == bob.dump_yaml() and texts.written == 2
