"""Many requests cheaply: ``marketplace request --repeat N`` (one connection, one report folder per
request, one line each and a summary, an exit status that tells the truth) and
``marketplace.connect`` (a client sending several requests on one connection), against one served
marketplace shared by the module's tests."""

from __future__ import annotations

import json
import subprocess

import pytest
from test_serve import REQUEST, Market, cli

from marketplace.reporting.absent import NOT_ASKED, REFERENCES_ABSENT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    """The service tests' small sketch marketplace, served once for the module."""
    served = Market(tmp_path_factory.mktemp("repeat"), consumers="alice,bob")
    yield served
    code, err = served.stop()
    assert code == 0, err


def repeat(market: Market, out: str, *extra: str) -> subprocess.CompletedProcess:
    proc = cli(
        "request",
        str(market.tmp / "request.yaml"),
        "--market",
        market.endpoint,
        "--keys",
        str(market.state / "consumers" / "alice"),
        "--out",
        str(market.tmp / out),
        "--quiet",
        "--wait",
        "300",
        *extra,
    )
    stdout, stderr = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_repeat_sends_the_request_n_times_each_report_in_its_own_folder(market):
    done = repeat(market, "series", "--repeat", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == ["request 1/2", "request 2/2"]
    assert all("completed in" in line for line in lines[:2])
    assert lines[-1].startswith("2 requests: 2 completed, 0 failed; latency p50 ") and "requests/min" in lines[-1]
    sessions = set()
    for i in (1, 2):
        report = json.loads((market.tmp / "series" / str(i) / "report.json").read_text())
        assert report["status"] == "completed"
        sessions.add(report["run_id"])
        # a served sketch session computes no central references unless asked, and says which it lacks
        absent = report[REFERENCES_ABSENT]
        assert absent["truth"] == absent["metrics.errors"] == NOT_ASKED
        assert report["truth"] == {"absent": NOT_ASKED}
    assert len(sessions) == 2


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_repeat_refuses_a_count_below_one_naming_the_flag(market, value):
    done = repeat(market, f"bad{value}", "--repeat", value)
    assert done.returncode == 2
    assert "--repeat" in done.stderr and "a whole number of at least 1" in done.stderr and repr(value) in done.stderr
    assert not (market.tmp / f"bad{value}").exists()


def test_a_python_client_sends_two_requests_on_one_connection(market):
    import marketplace

    with marketplace.connect(market.endpoint, market.state / "consumers" / "bob") as client:
        first = client.request(market.tmp / "request.yaml", out=market.tmp / "py-1")
        second = client.request(REQUEST, out=market.tmp / "py-2", references=True)
        assert client.sent == 2 and client.handshakes == 1  # one connection, one CURVE handshake
    assert first.status == second.status == "completed"
    assert first.raw["run_id"] != second.raw["run_id"]
    assert REFERENCES_ABSENT in first.raw and REFERENCES_ABSENT not in second.raw  # asked: every figure there
    assert not second.raw["truth"].get("absent")
    with pytest.raises(ValueError, match="closed"):
        client.request(REQUEST, out=market.tmp / "py-3")
