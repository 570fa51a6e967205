"""The report's noise line (``noise.summary``) says who could strip the run's noise, and it is right
in every combination of noise source (``seed``, ``keys``, ``auto``, each of the last two with a
folder of keys in ``noise.keys`` too, and ``secure`` mode) and lifetime ledgers (off, on): the line
follows each party's origin (``noise.parties.<party>.origin``), never the wording of its source, so
noise drawn from the run seed and a request id (which the scenario every party reads holds too) is
never mistaken for noise behind a key. ``noise.keys`` alone uses those keys; with ``noise.source:
seed`` it is refused."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

from marketplace.api import load, run
from marketplace.privacy import noise as noise_keys

SEED_LINE = "any party of this run"
KEY_LINE = "only whoever can read"
NOBODY_LINE = "nobody else can recompute"
LINES = {"seed": SEED_LINE, "key": KEY_LINE, "nobody": NOBODY_LINE}

SCENARIOS = {
    "sketch": (ROOT / "scenarios" / "sketch-quickstart.yaml", {"sketch.samples": 2000}, "sketch.secure"),
    "summarize": (
        ROOT / "scenarios" / "quickstart-private.yaml",
        {"summarize.rounds": 3, "summarize.features": 30},
        "summarize.privacy.secure",
    ),
    "stc": (ROOT / "scenarios" / "stc-synthetic.yaml", {}, "stc.privacy.secure"),
    "pfds": (
        ROOT / "scenarios" / "pfds-synthetic.yaml",
        {"parties.owners": 5, "data.source.table.synthetic.rows": 2000},
        "pfds.secure",
    ),
}
"""Every protocol, each with its ``secure`` setting: small runs of a shipped scenario."""
SOURCES = ("seed", "keys", "auto", "auto+folder", "keys+folder")
"""``noise.source``, and ``+folder``: with ``noise.keys`` naming a folder that holds every party's key."""
PARTIES = ["curator", *(f"owner-{i}" for i in range(1, 6)), "consumer"]


def noise_report(tmp_path: Path, protocol: str, source: str, secure: bool, ledgers: bool) -> dict:
    path, small, secure_key = SCENARIOS[protocol]
    source, _, folder = source.partition("+")
    sets: dict = {**small, "noise.source": source, secure_key: secure}
    if folder:
        noise_keys.write_keys(tmp_path / "keys", PARTIES)
        sets["noise.keys"] = str(tmp_path / "keys")
    if ledgers:
        sets |= {"lifetime.ledgers": str(tmp_path / "ledgers"), "lifetime.budget.epsilon": 10.0}
    report = run(load(path, sets), tmp_path / "run", driver="inprocess", check=False)
    return json.loads((report.folder / "report.json").read_text())


def expected_kind(source: str, secure: bool) -> str:
    """Who could strip the noise under ``marketplace run``: ``auto`` is the seed there."""
    if secure:
        return "nobody"
    return "key" if source.startswith("keys") or source.endswith("+folder") else "seed"


def assert_line(noise: dict, kind: str, *, request_id: str | None) -> None:
    line = noise["summary"]
    assert [k for k, phrase in LINES.items() if phrase in line] == [kind], line
    origins = {party: d["origin"] for party, d in noise["parties"].items()}
    assert origins, noise
    want = {"seed": {"seed"}, "key": {"key"}, "nobody": {"secure"}}[kind]
    assert set(origins.values()) == want, origins
    if kind == "seed" and request_id:
        assert "request id" in line and "hides nothing" in line, line  # it is in the scenario too


@pytest.mark.parametrize(
    "protocol, source, secure, ledgers", list(itertools.product(SCENARIOS, SOURCES, (False, True), (False, True)))
)
def test_the_noise_line_is_right_for_every_source_and_ledger_setting(tmp_path, protocol, source, secure, ledgers):
    report = noise_report(tmp_path, protocol, source, secure, ledgers)
    request_id = (report.get("lifetime") or {}).get("request_id")
    assert bool(request_id) == ledgers
    assert_line(report["noise"], expected_kind(source, secure), request_id=request_id)
    if source.endswith("+folder") and not secure:  # the folder's keys, not fresh ones
        assert all(
            d["key_file"].startswith(str((tmp_path / "keys").resolve()))
            for d in (ledger["noise"] for ledger in report["privacy"].values() if "noise" in ledger)
        ), report["privacy"]
    for name, ledger in report["privacy"].items():  # every ledger's noise says the same
        if isinstance(ledger, dict) and "noise" in ledger:
            assert (
                ledger["noise"]["origin"]
                in {"seed": ("seed",), "key": ("key",), "nobody": ("secure",)}[expected_kind(source, secure)]
            ), (name, ledger["noise"])


def test_the_noise_line_follows_each_partys_origin_in_a_mixed_run():
    from marketplace.privacy.noise import NoiseOrigin, describe, origin_of
    from marketplace.runtime.assemble import noise_line

    seeded = describe(NoiseOrigin("seed", request="req-1"), "owner-1", secure=False)
    keyed = describe(NoiseOrigin.from_key(bytes(32), "/kits/owner-2/owner-2.noise_key"), "owner-2", secure=False)
    fresh = describe(NoiseOrigin.fresh(), "owner-3", secure=False)
    secure = describe(NoiseOrigin.seed(), "owner-4", secure=True)
    assert [origin_of(d) for d in (seeded, keyed, fresh, secure)] == ["seed", "key", "fresh", "secure"]
    line = noise_line({"owner-1": "seed", "owner-2": "key", "owner-3": "fresh", "owner-4": "secure"}, "req-1")
    assert "1 of 4 parties (owner-1) draw noise from the run seed and the request id (req-1)" in line
    assert "1 of 4 parties (owner-2) draw noise with their own noise key" in line
    assert "nobody else can recompute the noise of owner-3, owner-4" in line
    assert noise_line({"owner-2": "key", "owner-3": "fresh"}).count("any party") == 0
    assert noise_line({}).startswith("unknown")


def test_a_party_report_without_an_origin_is_read_conservatively():
    from marketplace.privacy.noise import origin_of

    assert (
        origin_of(
            {
                "source": "the run seed and the request id (r)",
                "reproducible": True,
                "who_can_strip": "anyone who knows the run seed",
            }
        )
        == "seed"
    )
    assert origin_of({"source": "whatever", "reproducible": True, "who_can_strip": "only whoever can read"}) == "seed"
    assert origin_of({"source": "k", "key_file": "/k/owner-1.noise_key", "who_can_strip": "only whoever"}) == "key"
    assert origin_of({"source": "OS entropy", "reproducible": False, "who_can_strip": "nobody"}) == "fresh"


def test_noise_keys_alone_uses_the_keys_and_reproduces_a_keyed_run(tmp_path):
    path, small, _ = SCENARIOS["sketch"]
    keyed = run(load(path, {**small, "noise.source": "keys"}), tmp_path / "a", driver="inprocess")
    again = run(load(path, {**small, "noise.keys": str(tmp_path / "a" / "keys")}), tmp_path / "b", driver="inprocess")
    report = json.loads((again.folder / "report.json").read_text())
    assert report["noise"]["source"] == "keys"
    assert {d["origin"] for d in report["noise"]["parties"].values()} == {"key"}
    assert report["privacy"]["owner-1"]["noise"]["key_file"] == str(
        (tmp_path / "a" / "keys" / "owner-1.noise_key").resolve()
    )
    first = json.loads((keyed.folder / "report.json").read_text())
    assert report["estimates"] == first["estimates"]  # the same keys: the same noise


def test_noise_keys_with_noise_source_seed_is_refused_naming_both(tmp_path):
    noise_keys.write_keys(tmp_path / "keys", PARTIES)
    result = run_cli(
        "run",
        str(SCENARIOS["sketch"][0]),
        "--driver",
        "inprocess",
        "--out",
        str(tmp_path / "run"),
        "--set",
        "noise.source=seed",
        "--set",
        f"noise.keys={tmp_path / 'keys'}",
    )
    assert result.returncode == 2, result.stdout[-2000:] + result.stderr[-2000:]
    assert "noise.keys" in result.stderr and "noise.source" in result.stderr, result.stderr
    assert not (tmp_path / "run" / "report.json").exists()


COINS_BY_SEED = "any party that knows the run seed"


@pytest.mark.parametrize("source, secure", [("seed", False), ("auto", False), ("keys", False), ("seed", True)])
def test_the_auction_says_when_any_party_that_knows_the_seed_can_reproduce_its_coins(tmp_path, source, secure):
    """The private auction draws whom it asks (and in what order) from the curator's noise stream:
    under seed noise every party can reproduce those coins, so the auction's eps does not hold
    against it. The auction's ledger (and the per-owner table, which copies it) and the run's noise
    line say so; under keys or secure mode nobody but the key's holder (or nobody) can."""
    report = noise_report(tmp_path, "summarize", source, secure, ledgers=False)
    auction = report["privacy"]["auction"]["noise"]
    line = report["noise"]["summary"]
    others = report["privacy_per_owner"]["groups"][0]["observers"][2]
    copied = next(entry for entry in others["ledgers"] if entry["ledger"] == "auction")["noise"]
    assert copied == auction
    if source in ("seed", "auto") and not secure:
        assert COINS_BY_SEED in auction["coins"] and "eps does not hold" in auction["coins"], auction
        assert "auction" in line and "coins" in line and "eps does not hold" in line, line
        for name in ("D_s", "consumer:D_v"):  # Gaussian noise: strippable, as the line says, but no coins
            assert "coins" not in report["privacy"][name]["noise"]
    else:
        assert COINS_BY_SEED not in json.dumps(auction) and "coins" not in line, (auction, line)
        if secure:
            assert "coins" not in auction
        else:
            assert "curator.noise_key" in auction["coins"], auction


def test_the_per_owner_table_says_the_auctions_coins_are_reproducible():
    from marketplace.reporting.per_owner import noise_text

    seeded = {
        "origin": "seed",
        "source": "the run seed",
        "who_can_strip": "anyone who knows the run seed",
        "coins": "the auction's coins (...) come from this party's seed-derived noise stream",
    }
    assert "its coins reproducible by the same, so its eps does not hold" in noise_text(seeded)
    assert "coins" not in noise_text({k: v for k, v in seeded.items() if k != "coins"})
