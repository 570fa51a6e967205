"""Noise that only its party can know: the noise-recovery attack succeeds against a run whose noise
comes from the seed (and that run says so), and recovers nothing from a deployment whose parties
hold their own noise keys: under both drivers, from provisioned kits, and with parties started by
hand from their kits."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_cli
from noise_attack import attack

from marketplace.privacy import noise
from marketplace.protocols.sketch.release import SketchRelease
from marketplace.provision import provision
from marketplace.scenario import load_scenario

SKETCH = ROOT / "scenarios" / "sketch-quickstart.yaml"
OWNERS = [f"owner-{i}" for i in range(1, 5)]
STRIPPED = 1e-6
"""An attack that brings an owner's count within this of the truth recovered it (the count's noise
has Laplace scale 1 / (0.02 eps) = 50 here: a secret draw lands this close with probability ~1e-8)."""


def run(out: Path, *sets: str, driver: str = "inprocess") -> dict:
    result = run_cli(
        "run", str(SKETCH), "--driver", driver, "--out", str(out), *[a for s in sets for a in ("--set", s)]
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return json.loads((out / "report.json").read_text()) | {"_stdout": result.stdout}


def stripped(out: Path, owner: str, origin: noise.NoiseOrigin | None = None) -> bool:
    found = attack(out, load_scenario(out / "scenario.resolved.yaml"), owner, origin)
    return found["count_error"] < STRIPPED and found["sums_error"] < STRIPPED


def own_key(path: Path, party: str) -> noise.NoiseOrigin:
    return noise.NoiseOrigin.from_key(noise.read_key(path, party), str(path))


def test_a_seed_shared_run_is_stripped_by_any_party_and_says_so(tmp_path):
    report = run(tmp_path / "run")
    assert all(stripped(tmp_path / "run", owner) for owner in OWNERS)
    assert report["noise"]["source"] == "seed"
    for owner in OWNERS:
        assert report["privacy"][owner]["noise"]["source"] == "the run seed"
        assert "every party of this run" in report["privacy"][owner]["noise"]["who_can_strip"]
    assert "any party of this run" in report["noise"]["summary"]
    assert "noise" in report["_stdout"] and "strip" in report["_stdout"]


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["inprocess", "processes"])
def test_a_run_with_noise_keys_leaves_nothing_to_strip_under_either_driver(tmp_path, driver):
    out = tmp_path / "run"
    report = run(out, "noise.source=keys", driver=driver)
    consumer = own_key(out / "keys" / "consumer.noise_key", "consumer")
    for owner in OWNERS:
        assert not stripped(out, owner)  # the seed alone
        assert not stripped(out, owner, consumer)  # the consumer's own key
        assert stripped(
            out, owner, own_key(out / "keys" / f"{owner}.noise_key", owner)
        )  # the owner's key: the attack is real
        ledger = report["privacy"][owner]["noise"]
        assert ledger["source"] == f"the run seed and {owner}'s noise key" and ledger["key_file"].endswith(
            f"{owner}.noise_key"
        )
        assert stat.S_IMODE((out / "keys" / f"{owner}.noise_key").stat().st_mode) == 0o600
    assert "only whoever can read" in report["noise"]["summary"]


def test_the_runner_holds_every_key_so_a_keyed_run_reproduces_exactly(tmp_path):
    run(tmp_path / "a", "noise.source=keys")
    run(tmp_path / "b", "noise.source=keys", f"noise.keys={tmp_path / 'a' / 'keys'}")
    run(tmp_path / "c", "noise.source=keys")
    release = {name: SketchRelease.load(tmp_path / name / "sketches" / "owner-1.npz") for name in "abc"}
    assert release["a"].count == release["b"].count and np.array_equal(release["a"].numerator, release["b"].numerator)
    assert release["a"].count != release["c"].count  # fresh keys: other noise


@pytest.mark.slow
def test_two_deployments_provisioned_from_one_scenario_release_different_noise(tmp_path):
    scenario = load_scenario(SKETCH)
    counts = []
    for name, driver in (("kits-a", "inprocess"), ("kits-b", "processes")):
        provision(scenario, tmp_path / name, endpoint="tcp://127.0.0.1:1")
        out = tmp_path / f"run-{name}"
        report = run(out, f"noise.keys={tmp_path / name}", "noise.source=keys", driver=driver)
        assert not any(stripped(out, owner) for owner in OWNERS)
        assert report["privacy"]["owner-1"]["noise"]["key_file"] == str(
            (tmp_path / name / "owner-1" / "owner-1.noise_key").resolve()
        )
        assert stripped(out, "owner-1", own_key(tmp_path / name / "owner-1" / "owner-1.noise_key", "owner-1"))
        counts.append(SketchRelease.load(out / "sketches" / "owner-1.npz").count)
    assert counts[0] != counts[1]


def test_kits_hold_their_own_noise_key_and_shared_noise_must_be_asked_for_and_is_labelled(tmp_path):
    result = run_cli("provision", str(SKETCH), "--out", str(tmp_path / "kits"))
    assert result.returncode == 0, result.stderr
    keys = {p: noise.read_key(tmp_path / "kits" / p / f"{p}.noise_key", p) for p in ["curator", *OWNERS, "consumer"]}
    assert len(set(keys.values())) == len(keys)
    for party in keys:
        kit = tmp_path / "kits" / party
        assert sorted(p.name for p in kit.glob("*.noise_key")) == [f"{party}.noise_key"]
        assert stat.S_IMODE((kit / f"{party}.noise_key").stat().st_mode) == 0o600
        assert "SECRET" in json.loads((kit / "kit.json").read_text())["files"][f"{party}.noise_key"]
        assert load_scenario(kit / "scenario.yaml").config.noise.source == "keys"
    shared = run_cli("provision", str(SKETCH), "--out", str(tmp_path / "shared"), "--shared-noise")
    assert shared.returncode == 0 and "--shared-noise" in shared.stderr
    assert not list((tmp_path / "shared").rglob("*.noise_key"))
    manifest = json.loads((tmp_path / "shared" / "owner-1" / "kit.json").read_text())
    assert "strip any other party's noise" in manifest["noise"]["warning"]
    assert load_scenario(tmp_path / "shared" / "owner-1" / "scenario.yaml").config.noise.source == "seed"


def start(kit: Path, log: Path, *extra: str) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            ["sh", str(kit / "start.sh"), *extra], stdout=out, stderr=subprocess.STDOUT, cwd=kit.parent.parent
        )


@pytest.mark.slow
def test_parties_started_by_hand_from_their_kits_keep_their_noise_secret(tmp_path):
    kits = tmp_path / "kits"
    provision(load_scenario(SKETCH), kits, endpoint="tcp://127.0.0.1:1", bind="tcp://127.0.0.1:0")
    endpoint_file, reports = tmp_path / "endpoint", tmp_path / "parties"
    procs = {
        "curator": start(
            kits / "curator",
            tmp_path / "curator.log",
            "--endpoint-file",
            str(endpoint_file),
            "--report",
            str(reports / "curator.json"),
        )
    }
    try:
        deadline = time.monotonic() + 60
        while not endpoint_file.exists():
            assert procs["curator"].poll() is None and time.monotonic() < deadline, (
                tmp_path / "curator.log"
            ).read_text()
            time.sleep(0.05)
        endpoint = endpoint_file.read_text()
        for party in [*OWNERS, "consumer"]:
            procs[party] = start(
                kits / party,
                tmp_path / f"{party}.log",
                "--endpoint",
                endpoint,
                "--report",
                str(reports / f"{party}.json"),
            )
        codes = {party: proc.wait(240) for party, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert codes == dict.fromkeys(procs, 0), {p: (tmp_path / f"{p}.log").read_text()[-1500:] for p in procs}
    consumer = json.loads((reports / "consumer.json").read_text())
    out = tmp_path / "as-the-consumer-holds-it"
    (out / "sketches").mkdir(parents=True)
    (out / "scenario.resolved.yaml").write_text((kits / "consumer" / "scenario.yaml").read_text())
    from marketplace.protocols.sketch.consumer import release_from_dict

    for owner, data in consumer["result"]["sketches"]["owners"].items():
        release_from_dict(data).save(out / "sketches" / f"{owner}.npz")
    consumer_key = own_key(kits / "consumer" / "consumer.noise_key", "consumer")
    for owner in OWNERS:
        assert not stripped(out, owner) and not stripped(out, owner, consumer_key)
        assert stripped(out, owner, own_key(kits / owner / f"{owner}.noise_key", owner))
        owner_report = json.loads((reports / f"{owner}.json").read_text())
        assert owner_report["noise"]["who_can_strip"].startswith(f"only whoever can read {owner}'s noise key file")


def test_a_party_started_alone_without_a_key_file_draws_a_fresh_key_nobody_holds(tmp_path):
    origin = noise.resolve("auto", "owner-1", [tmp_path], started_alone=True)
    assert origin.kind == "fresh" and noise.describe(origin, "owner-1", secure=False)["who_can_strip"] == "nobody"
    assert noise.resolve("auto", "owner-1", [tmp_path], started_alone=True).key != origin.key
    assert noise.resolve("auto", "owner-1", [tmp_path], started_alone=False).kind == "seed"
    assert noise.resolve("seed", "owner-1", [tmp_path], started_alone=True).kind == "seed"
    noise.write_key(tmp_path, "owner-1")
    found = noise.resolve("keys", "owner-1", [None, tmp_path], started_alone=True)
    assert found.kind == "key" and found.where.endswith("owner-1.noise_key")
    assert found.key.hex() not in repr(found) and found.key.hex() not in str(found)  # a key is never printed


def test_secure_mode_noise_is_strippable_by_nobody():
    described = noise.describe(noise.NoiseOrigin.seed(), "owner-1", secure=True)
    assert described["who_can_strip"] == "nobody" and "OpenDP" in described["source"]


def test_a_derived_stream_needs_the_key():
    key = bytes(range(32))
    with_key = noise.derive(3, "stc.noise.owner-2", noise.NoiseOrigin.from_key(key, "k")).generate_state(4)
    again = noise.derive(3, "stc.noise.owner-2", noise.NoiseOrigin.from_key(key, "k")).generate_state(4)
    other = noise.derive(3, "stc.noise.owner-2", noise.NoiseOrigin.from_key(bytes(32), "k")).generate_state(4)
    seeded = noise.derive(3, "stc.noise.owner-2", None).generate_state(4)
    assert (
        np.array_equal(with_key, again) and not np.array_equal(with_key, other) and not np.array_equal(with_key, seeded)
    )


@pytest.mark.parametrize(
    "content, expected",
    [
        ("", "expected one line of 64 hex digits"),
        ("zz" * 32 + "\n", "expected one line of 64 hex digits"),
        ("ab" * 31 + "\n", "expected one line of 64 hex digits"),
        ("ab" * 32 + "\n" + "cd" * 32 + "\n", "got 2 line(s)"),
    ],
)
def test_a_bad_noise_key_file_is_refused_naming_the_party_and_the_file(tmp_path, content, expected):
    path = tmp_path / "owner-3.noise_key"
    path.write_text(content)
    with pytest.raises(ValueError, match="owner-3") as err:
        noise.read_key(path, "owner-3")
    assert expected in str(err.value) and str(path) in str(err.value)


def test_a_bad_noise_source_is_a_scenario_error_naming_the_key():
    result = run_cli("validate", str(SKETCH), "--set", "noise.source=random")
    assert result.returncode == 2 and "noise.source" in result.stderr


def test_keys_generate_writes_a_secret_noise_key_per_party(tmp_path):
    result = run_cli("keys", "generate", str(tmp_path / "keys"), "--owners", "2")
    assert result.returncode == 0, result.stderr
    parties = ["curator", "owner-1", "owner-2", "consumer"]
    keys = [noise.read_key(tmp_path / "keys" / f"{p}.noise_key", p) for p in parties]
    assert len(set(keys)) == 4
    assert all(stat.S_IMODE((tmp_path / "keys" / f"{p}.noise_key").stat().st_mode) == 0o600 for p in parties)
