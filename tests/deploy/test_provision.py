"""`marketplace provision`: one kit per party, each with its own secret key and only the public
keys it needs; refusals of bad input; files given to another uid."""

from __future__ import annotations

import json
import os
import stat

import pytest
import zmq.auth
from conftest import QUICKSTART, run_cli

from marketplace.provision import ProvisionError, provision
from marketplace.scenario import load_scenario

PARTIES = ["curator", "owner-1", "owner-2", "owner-3", "owner-4", "consumer"]


@pytest.fixture
def kits(tmp_path):
    result = run_cli("provision", str(QUICKSTART), "--out", str(tmp_path / "kits"), "--endpoint", "tcp://10.0.0.5:6000")
    assert result.returncode == 0, result.stderr
    return tmp_path / "kits"


def files(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_every_party_gets_a_kit_with_its_own_secret_key_only(kits):
    assert sorted(p.name for p in kits.iterdir()) == sorted(PARTIES)
    for party in PARTIES:
        secrets = [p.name for p in (kits / party).iterdir() if p.name.endswith(".key_secret")]
        assert secrets == [f"{party}.key_secret"], party
        assert stat.S_IMODE((kits / party / f"{party}.key_secret").stat().st_mode) == 0o600
        assert stat.S_IMODE((kits / party).stat().st_mode) == 0o700


def test_the_curators_kit_holds_every_other_partys_public_key_and_the_others_only_the_curators(kits):
    assert files(kits / "curator") == [
        "consumer.key",
        "curator.key_secret",
        "curator.noise_key",
        "kit.json",
        "owner-1.key",
        "owner-2.key",
        "owner-3.key",
        "owner-4.key",
        "scenario.yaml",
        "start.sh",
    ]
    assert files(kits / "owner-2") == [
        "curator.key",
        "kit.json",
        "owner-2.key_secret",
        "owner-2.noise_key",
        "scenario.yaml",
        "start.sh",
    ]
    curator_public, _ = zmq.auth.load_certificate(str(kits / "curator" / "curator.key_secret"))
    for party in PARTIES[1:]:
        assert zmq.auth.load_certificate(str(kits / party / "curator.key"))[0] == curator_public
        own, _ = zmq.auth.load_certificate(str(kits / party / f"{party}.key_secret"))
        assert zmq.auth.load_certificate(str(kits / "curator" / f"{party}.key"))[0] == own


def test_each_kit_names_the_run_the_scenario_and_its_start_command(kits):
    manifests = {p: json.loads((kits / p / "kit.json").read_text()) for p in PARTIES}
    assert len({m["run_id"] for m in manifests.values()}) == 1
    assert len({m["scenario"]["fingerprint"] for m in manifests.values()}) == 1
    owner = manifests["owner-3"]
    assert (
        owner["command"][:4] == ["marketplace", "owner", "--id", "owner-3"]
        and "tcp://10.0.0.5:6000" in owner["command"]
    )
    assert "tcp://0.0.0.0:6000" in manifests["curator"]["command"]
    script = (kits / "owner-3" / "start.sh").read_text()
    assert "exec marketplace owner --id owner-3" in script and "${MARKETPLACE_ENDPOINT:-tcp://10.0.0.5:6000}" in script
    assert os.access(kits / "owner-3" / "start.sh", os.X_OK)
    assert "curve_keys" not in (kits / "owner-3" / "scenario.yaml").read_text()


def test_two_provisionings_draw_different_keys_and_run_ids(tmp_path):
    scenario = load_scenario(QUICKSTART)
    a, b = provision(scenario, tmp_path / "a"), provision(scenario, tmp_path / "b")
    assert a[1].command[-1] != b[1].command[-1]
    assert (tmp_path / "a/owner-1/curator.key").read_text() != (tmp_path / "b/owner-1/curator.key").read_text()


def test_an_existing_kit_is_refused_and_force_replaces_it_without_stale_keys(tmp_path, kits):
    again = run_cli("provision", str(QUICKSTART), "--out", str(kits))
    assert again.returncode == 2 and "already holds a kit" in again.stderr and "--force" in again.stderr
    (kits / "curator" / "owner-9.key").write_text("an old provisioning's key")
    forced = run_cli("provision", str(QUICKSTART), "--out", str(kits), "--force")
    assert forced.returncode == 0, forced.stderr
    assert not (kits / "curator" / "owner-9.key").exists(), "a stale key would stay allowlisted"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--endpoint", "curator:5555"], "--endpoint: expected tcp://HOST:PORT, got 'curator:5555'"),
        (["--endpoint", "tcp://curator:99999"], "expected a port number 1-65535"),
        (["--bind", "udp://0.0.0.0:1"], "--bind: expected tcp://HOST:PORT"),
        (["--chown", "market"], "--chown: expected UID or UID:GID as numbers"),
        (["--set", "parties.owners=0"], "parties.owners"),
    ],
)
def test_bad_options_exit_2_and_name_the_option(tmp_path, args, message):
    result = run_cli("provision", str(QUICKSTART), "--out", str(tmp_path / "k"), *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "k").exists()


def test_a_missing_scenario_exits_2(tmp_path):
    result = run_cli("provision", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "k"))
    assert result.returncode == 2 and "scenario file not found" in result.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another uid needs root")
def test_chown_gives_every_kit_file_and_the_reports_folder_to_another_uid(tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "owner-1.json").write_text("{}")  # an earlier run's report
    result = run_cli(
        "provision", str(QUICKSTART), "--out", str(tmp_path / "k"), "--chown", "4242:4343", "--reports", str(reports)
    )
    assert result.returncode == 0, result.stderr
    for path in [*(tmp_path / "k").rglob("*"), reports]:
        assert (path.stat().st_uid, path.stat().st_gid) == (4242, 4343), path
    assert list(reports.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="reading files as another uid needs root (setuid in a child)")
def test_a_kit_given_to_the_container_user_is_readable_by_that_user_only():
    import shutil
    import tempfile
    from pathlib import Path

    top = Path(tempfile.mkdtemp(prefix="kit-uid-"))  # pytest's tmp_path sits under a root-only folder
    try:
        os.chmod(top, 0o755)
        provision(load_scenario(QUICKSTART), top / "k", chown=(1000, 1000))
        secret = top / "k" / "owner-1" / "owner-1.key_secret"
        assert readable_as(1000, secret) and not readable_as(4242, secret)
    finally:
        shutil.rmtree(top)


def readable_as(uid: int, path) -> bool:
    """Whether ``uid`` can read ``path``: a forked child drops to that uid and tries."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.setgid(uid)
            os.setuid(uid)
            with open(path, "rb"):
                os._exit(0)
        except OSError:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def test_provision_from_python_refuses_a_bad_endpoint(tmp_path):
    with pytest.raises(ProvisionError, match="--endpoint"):
        provision(load_scenario(QUICKSTART), tmp_path, endpoint="tcp://:5555")


def test_the_help_examples_of_party_commands_carry_keys_and_parse():
    import re
    import shlex

    from marketplace.cli import DESCRIPTION, _parser

    lines = [line.strip() for line in DESCRIPTION.splitlines() if line.strip().startswith("marketplace ")]
    party = [line for line in lines if line.split()[1] in ("curator", "owner", "consumer")]
    assert len(party) == 3 and all("--keys" in line for line in party)
    for line in lines:
        argv = shlex.split(re.sub(r"\s{3,}(?!-)\S.*$", "", line))[1:]  # the command, without the comment after it
        _parser().parse_args(argv)  # exits (SystemExit) on an example that does not parse
