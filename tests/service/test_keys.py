"""A served marketplace's keys: a new consumer's kit (`marketplace keys consumer`, ``add_consumer``),
and an allowlist that follows STATE/keys/ while the server runs (``AllowlistReloader`` and the ZAP
handler's ``reload``), each checked without a server: a clock of the test's own, no sleeps."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import zmq
import zmq.auth
import zmq.utils.z85
from conftest import ROOT

from marketplace.service import keys as market_keys
from marketplace.service.keys import (
    AllowlistReloader,
    StateFolderError,
    add_consumer,
    allowlist,
    check_consumer_name,
    init_keys,
)
from marketplace.transport import curve
from marketplace.transport.curve import PartyAuthenticator


def keys_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "marketplace", "keys", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.fixture
def state(tmp_path) -> Path:
    """A marketplace's state folder as `serve --consumers alice` leaves it."""
    folder = tmp_path / "state"
    init_keys(folder, owners=2, consumers=["alice"], market_text="name: tiny-market\n")
    return folder


def tree(folder: Path) -> dict[str, int]:
    """Each file under ``folder`` (relative path) -> its permission bits."""
    return {p.relative_to(folder).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in folder.rglob("*") if p.is_file()}


# --- a new consumer's kit


def test_add_consumer_makes_the_kit_serve_consumers_makes(state, tmp_path):
    kit = add_consumer(state, "dave")
    assert kit == state / "consumers" / "dave"
    # the same files, with the same permissions, as serve --consumers dave makes
    reference = tmp_path / "reference"
    init_keys(reference, owners=2, consumers=["dave"], market_text="name: tiny-market\n")
    assert tree(kit) == tree(reference / "consumers" / "dave")
    assert tree(kit)["dave.key_secret"] == 0o600
    assert (kit / "server.key").read_bytes() == (state / "keys" / "server.key").read_bytes()
    assert (kit / "market.yaml").read_text() == "name: tiny-market\n"
    public = zmq.auth.load_certificate(str(kit / "dave.key_secret"))[0]
    assert zmq.auth.load_certificate(str(state / "keys" / "consumers" / "dave.key"))[0] == public
    assert allowlist(state)[public] == "consumer:dave"
    assert not list(state.rglob("*.tmp"))  # the atomic writes leave nothing beside the keys


def test_the_package_exposes_add_consumer():
    import marketplace

    assert marketplace.add_consumer is add_consumer
    assert "add_consumer" in marketplace.__all__


@pytest.mark.parametrize(
    "name", ["", "a/b", "../dave", ".dave", "Dave", "1dave", "d" * 33, "dave\n", "da ve", "dave.key", "-dave"]
)
def test_a_name_that_is_no_consumer_name_is_refused_and_nothing_is_made(state, name):
    before = tree(state)
    with pytest.raises(ValueError, match=r"expected lower case letters, digits") as err:
        add_consumer(state, name)
    assert repr(name) in str(err.value)
    assert tree(state) == before


@pytest.mark.parametrize("name", ["server", "curator", "consumer", "owner", "owner-1", "owner-2", "owner-250"])
def test_a_name_the_marketplace_uses_is_refused_as_a_consumer_name_and_nothing_is_made(state, name):
    """A consumer named `server` got a kit whose server.key was its own key (every request refused at the
    handshake); one named `owner-1` reads as that owner: both are refused before anything is made."""
    before = tree(state)
    with pytest.raises(ValueError, match=r"expected a name of the consumer's own, got one the marketplace uses") as err:
        add_consumer(state, name)
    assert repr(name) in str(err.value) and "owner-<n>" in str(err.value)
    assert tree(state) == before
    assert check_consumer_name("owner-x") == "owner-x" and check_consumer_name("servers") == "servers"


def test_the_command_and_serve_refuse_a_name_the_marketplace_uses(state, tmp_path):
    for name in ("server", "owner-1"):
        done = keys_cli("consumer", name, "--market", str(state), cwd=tmp_path)
        assert done.returncode == 2, (name, done.stderr)
        assert f"marketplace keys consumer: consumer name {name!r}: expected a name of the consumer's own" in (
            done.stderr
        )
        assert not (state / "consumers" / name).exists() and not (state / "keys" / "consumers" / f"{name}.key").exists()
    market = ROOT / "scenarios" / "market-serve.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "marketplace", "serve", str(market), "--state", str(tmp_path / "s2")]
        + ["--init", "--consumers", "alice,server"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 2 and "marketplace serve: consumer name 'server': expected a name" in done.stderr
    assert not (tmp_path / "s2").exists()


def test_an_existing_key_of_a_reserved_name_is_still_read_into_the_allowlist(state):
    """The rule is for new consumers: a key already allowed under such a name is read as before."""
    (state / "keys" / "consumers" / "alice.key").rename(state / "keys" / "consumers" / "owner-9.key")
    assert "consumer:owner-9" in allowlist(state).values()


def test_the_longest_name_is_admitted_and_a_trailing_newline_is_not():
    assert check_consumer_name("d" * 32) == "d" * 32
    with pytest.raises(ValueError):
        check_consumer_name("dave\n")  # `$` alone would take it


def test_an_existing_consumer_is_refused_naming_its_kit_and_nothing_is_replaced(state):
    before = {p: p.read_bytes() for p in state.rglob("*") if p.is_file()}
    with pytest.raises(StateFolderError, match="consumer 'alice' already exists") as err:
        add_consumer(state, "alice")
    assert str(state / "consumers" / "alice") in str(err.value)
    assert {p: p.read_bytes() for p in state.rglob("*") if p.is_file()} == before
    # a kit folder left without its public key is not taken over either
    (state / "consumers" / "erin").mkdir()
    with pytest.raises(StateFolderError, match=r"its kit is .*consumers/erin"):
        add_consumer(state, "erin")
    assert not (state / "keys" / "consumers" / "erin.key").exists()


@pytest.mark.parametrize("missing", ["folder", "server.key", "server.key_secret"])
def test_a_folder_that_is_no_marketplace_state_is_refused(tmp_path, state, missing):
    folder = tmp_path / "nowhere" if missing == "folder" else state
    if missing != "folder":
        (state / "keys" / missing).unlink()
    with pytest.raises(StateFolderError, match=r"not a marketplace's state folder: expected keys/server\.key"):
        add_consumer(folder, "dave")
    assert not (folder / "consumers" / "dave").exists()


def test_the_command_makes_the_kit_and_prints_the_request_line(state, tmp_path):
    (state / "server.json").write_text('{"endpoint": "tcp://127.0.0.1:7711", "pid": 1}')
    done = keys_cli("consumer", "dave", "--market", "state", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "state/consumers/dave" in done.stdout
    assert "marketplace request SCENARIO.yaml --market tcp://127.0.0.1:7711 --keys state/consumers/dave" in done.stdout
    assert (state / "keys" / "consumers" / "dave.key").is_file()
    assert stat.S_IMODE((state / "consumers" / "dave" / "dave.key_secret").stat().st_mode) == 0o600
    # a server bound to every interface: the consumer fills in the host
    (state / "server.json").write_text('{"endpoint": "tcp://0.0.0.0:7700", "pid": 1}')
    done = keys_cli("consumer", "erin", "--market", "state", cwd=tmp_path)
    assert done.returncode == 0 and "--market tcp://HOST:7700 --keys state/consumers/erin" in done.stdout


def test_the_command_refuses_bad_names_existing_consumers_and_other_folders(state, tmp_path):
    for name in ("a/b", ".dave", "", "d" * 33):
        done = keys_cli("consumer", name, "--market", str(state), cwd=tmp_path)
        assert done.returncode == 2, (name, done.stderr)
        assert f"consumer name {name!r}: expected lower case letters, digits" in done.stderr
    done = keys_cli("consumer", "alice", "--market", str(state), cwd=tmp_path)
    assert done.returncode == 2 and "consumer 'alice' already exists" in done.stderr
    assert str(state / "consumers" / "alice") in done.stderr
    (tmp_path / "plain").mkdir()
    done = keys_cli("consumer", "dave", "--market", str(tmp_path / "plain"), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{tmp_path / 'plain'}: not a marketplace's state folder: expected keys/server.key" in done.stderr
    assert not (tmp_path / "plain" / "consumers").exists()
    assert sorted(p.name for p in (state / "keys" / "consumers").iterdir()) == ["alice.key"]


# --- the allowlist, read again when the folders change


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def settled(folder: Path, at: float) -> None:
    """Set the modification time of ``folder`` (what the reloader compares), as a file system would."""
    os.utime(folder, (at, at))


def test_the_reloader_reads_the_folders_only_when_they_changed(state, monkeypatch):
    reads = []
    real = market_keys._read_allowlist
    monkeypatch.setattr(market_keys, "_read_allowlist", lambda s: reads.append(s) or real(s))
    wall = Clock(10_000.0)  # long after every modification time set below
    reloader = AllowlistReloader(state, wall_clock=wall)
    for kind in ("owners", "consumers"):
        settled(state / "keys" / kind, 5000.0)
    first = reloader()
    assert sorted(first.values()) == ["consumer:alice", "owner-1", "owner-2"]
    assert [reloader() for _ in range(100)] == [None] * 100 and len(reads) == 1
    add_consumer(state, "dave")
    settled(state / "keys" / "consumers", 5001.0)
    assert sorted(reloader().values()) == ["consumer:alice", "consumer:dave", "owner-1", "owner-2"]
    (state / "keys" / "consumers" / "alice.key").unlink()
    settled(state / "keys" / "consumers", 5002.0)
    assert sorted(reloader().values()) == ["consumer:dave", "owner-1", "owner-2"]
    assert reloader() is None and len(reads) == 3


def test_a_folder_changed_a_moment_ago_or_a_half_written_key_is_read_again(state, tmp_path, caplog):
    wall = Clock(10_000.0)
    reloader = AllowlistReloader(state, wall_clock=wall)
    settled(state / "keys" / "owners", 5000.0)
    settled(state / "keys" / "consumers", 9999.5)  # within RACY_S of the read: it may change in the same tick
    assert reloader() is not None
    assert reloader() is not None  # read again
    wall.now = 10_010.0
    assert reloader() is not None and reloader() is None  # settled now
    (state / "keys" / "consumers" / "erin.key").write_text("curve\n")  # being written: no key in it yet
    settled(state / "keys" / "consumers", 6000.0)
    assert "consumer:erin" not in reloader().values()
    assert any("erin.key" in r.getMessage() for r in caplog.records)
    (tmp_path / "erin").mkdir()
    pair = zmq.auth.create_certificates(str(tmp_path / "erin"), "erin")[0]
    (state / "keys" / "consumers" / "erin.key").write_bytes(Path(pair).read_bytes())
    # the folder's time did not change (a file rewritten in place), yet the key is read, as the last read failed
    assert "consumer:erin" in reloader().values()


# --- the ZAP handler with a reload


def zap_request(key: bytes) -> list[bytes]:
    return [b"1.0", b"7", b"", b"127.0.0.1", b"", b"CURVE", key]


def new_key() -> tuple[bytes, bytes]:
    """(z85, raw) public key of a fresh pair."""
    public = zmq.curve_keypair()[0]
    return public, zmq.utils.z85.decode(public)


class Folder:
    """An allowlist that the test changes, and that counts how often it is read."""

    def __init__(self, parties: dict[bytes, str]) -> None:
        self.parties = dict(parties)
        self.calls = 0
        self.changed = False

    def __call__(self) -> dict[bytes, str] | None:
        self.calls += 1
        if not self.changed:
            return None
        self.changed = False
        return dict(self.parties)


@pytest.fixture
def ctx(zmq_context):
    return zmq_context


def test_a_key_added_while_serving_is_admitted_and_a_removed_one_refused(ctx):
    alice, alice_raw = new_key()
    dave, dave_raw = new_key()
    folder, clock = Folder({alice: "consumer:alice"}), Clock()
    zap = PartyAuthenticator(ctx, folder.parties, reload=folder, clock=clock)
    assert zap.answer(zap_request(dave_raw))[2] == b"400"
    folder.parties[dave] = "consumer:dave"
    folder.changed = True
    clock.now += curve.RELOAD_INTERVAL_S
    assert zap.answer(zap_request(dave_raw))[2:5] == [b"200", b"OK", b"consumer:dave"]
    del folder.parties[alice]
    folder.changed = True
    clock.now += curve.RELOAD_INTERVAL_S
    assert zap.answer(zap_request(alice_raw))[2] == b"400"
    assert zap.answer(zap_request(dave_raw))[4] == b"consumer:dave"


def test_a_flood_of_unknown_keys_reads_the_allowlist_once_a_second(ctx):
    folder, clock = Folder({new_key()[0]: "owner-1"}), Clock()
    zap = PartyAuthenticator(ctx, folder.parties, reload=folder, clock=clock)
    for second in range(3):
        for _ in range(500):
            assert zap.answer(zap_request(new_key()[1]))[2] == b"400"
            clock.now += 0.001
        assert folder.calls == second + 1
        clock.now += curve.RELOAD_INTERVAL_S
    assert zap.refused == 1500


def test_an_unknown_key_waits_for_the_next_reload_instead_of_being_refused_early(ctx):
    folder, clock = Folder({}), Clock()
    zap = PartyAuthenticator(ctx, {}, reload=folder, clock=clock)
    assert zap.answer(zap_request(new_key()[1]))[2] == b"400"  # a reload now: the next is a second away
    dave, dave_raw = new_key()
    folder.parties[dave] = "consumer:dave"
    folder.changed = True
    assert zap.hold(b"envelope", zap_request(dave_raw))
    assert zap.answer_waiting() == []  # not due yet
    clock.now += curve.RELOAD_INTERVAL_S
    assert zap.answer_waiting() == [(b"envelope", [b"1.0", b"7", b"200", b"OK", b"consumer:dave", b""])]
    assert not zap.hold(b"envelope", zap_request(dave_raw))  # known now: answered at once
    for _ in range(curve.MAX_WAITING):
        assert zap.hold(b"e", zap_request(new_key()[1]))
    assert not zap.hold(b"e", zap_request(new_key()[1]))  # the queue is full: refused at once instead
    without = PartyAuthenticator(ctx, {})
    assert not without.hold(b"e", zap_request(new_key()[1]))  # no reload: nothing to wait for


def test_a_reload_that_fails_keeps_the_allowlist(ctx, caplog):
    alice, alice_raw = new_key()

    def broken() -> dict[bytes, str]:
        raise OSError("the disk is gone")

    zap = PartyAuthenticator(ctx, {alice: "consumer:alice"}, reload=broken, clock=Clock())
    assert zap.answer(zap_request(alice_raw))[2] == b"200"
    assert any("the previous one stays" in r.getMessage() for r in caplog.records)


def test_the_handler_holds_an_early_key_on_the_wire_and_admits_it_after_the_reload(ctx):
    """On the ZAP socket: a key added just after a reload is answered 200 once the next reload is due
    (the test's clock is the real one here: the handler's poll wakes for the reload)."""
    folder = Folder({})
    zap = PartyAuthenticator(ctx, {}, reload=folder)
    zap.start()
    req = ctx.socket(zmq.DEALER)
    req.setsockopt(zmq.LINGER, 0)
    req.connect(curve.ZAP_ENDPOINT)
    try:
        req.send_multipart([b"", *zap_request(new_key()[1])])  # a stranger: the reload happens now
        assert req.poll(10_000)
        assert req.recv_multipart()[3] == b"400"
        dave, dave_raw = new_key()
        folder.parties[dave] = "consumer:dave"
        folder.changed = True
        req.send_multipart([b"", *zap_request(dave_raw)])
        assert req.poll(10_000)
        assert req.recv_multipart()[3:6] == [b"200", b"OK", b"consumer:dave"]
    finally:
        req.close(linger=0)
        zap.stop()


# --- owners whose keys are in their own kits


def secret_keys(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.key_secret"))


def test_a_state_made_with_kits_gets_no_owner_secret_keys_when_served_again(tmp_path):
    state, kits = tmp_path / "state", tmp_path / "kits"
    init_keys(state, owners=2, consumers=["alice"], kits=kits, market_text="name: tiny-market\n")  # serve --init --kits
    published = {p.name: p.read_bytes() for p in (state / "keys" / "owners").iterdir()}
    init_keys(state, owners=2, consumers=[], market_text="name: tiny-market\n")  # what serve does on every start
    assert secret_keys(state) == ["keys/server.key_secret"]
    assert not (state / "owners").exists()
    assert {p.name: p.read_bytes() for p in (state / "keys" / "owners").iterdir()} == published
    for owner in ("owner-1", "owner-2"):  # each owner's kit key is the one the server admits
        kit_key = zmq.auth.load_certificate(str(kits / owner / f"{owner}.key_secret"))[0]
        assert allowlist(state)[kit_key] == owner


def test_an_owner_added_to_a_state_made_with_kits_gets_its_key_pair_in_the_state(tmp_path):
    state, kits = tmp_path / "state", tmp_path / "kits"
    init_keys(state, owners=2, consumers=[], kits=kits)
    init_keys(state, owners=3, consumers=[], market_text="name: tiny-market\n")
    assert secret_keys(state) == ["keys/server.key_secret", "owners/owner-3.key_secret"]
    assert (state / "owners" / "market.yaml").read_text() == "name: tiny-market\n"
    assert (state / "owners" / "server.key").read_bytes() == (state / "keys" / "server.key").read_bytes()
    assert len(allowlist(state)) == 3


def test_a_state_without_kits_keeps_its_owner_keys_in_the_state(state):
    before = tree(state)
    keys_before = {p: (state / p).read_bytes() for p in before}
    init_keys(state, owners=2, consumers=["alice"], market_text="name: tiny-market\n")
    assert tree(state) == before and {p: (state / p).read_bytes() for p in before} == keys_before
    assert secret_keys(state / "owners") == ["owner-1.key_secret", "owner-2.key_secret"]
