"""`marketplace serve --no-owners` on a state made with `serve --init --kits`: the owners' keys are in
their kits, and the server makes no secret key of its own for any of them (it would never use it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
import zmq.auth
from conftest import ROOT
from test_serve import MARKET, free_port

from marketplace.service.keys import allowlist

pytestmark = pytest.mark.slow


def marketplace(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "marketplace", *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        start_new_session=True,
    )


def test_serve_no_owners_on_a_state_made_with_kits_writes_no_owner_secret_keys(tmp_path):
    market, state, kits = tmp_path / "market.yaml", tmp_path / "state", tmp_path / "kits"
    market.write_text(yaml.safe_dump(MARKET))
    init = marketplace(
        "serve", str(market), "--state", str(state), "--init", "--kits", str(kits), "--consumers", "alice", cwd=tmp_path
    )
    out, err = init.communicate(timeout=120)
    assert init.returncode == 0, err
    published = {p.name: p.read_bytes() for p in (state / "keys" / "owners").iterdir()}
    assert sorted(published) == ["owner-1.key", "owner-2.key", "owner-3.key"]

    served = marketplace(
        "serve", str(market), "--state", str(state), "--no-owners", "--endpoint", f"tcp://127.0.0.1:{free_port()}",
        cwd=tmp_path,
    )  # fmt: skip
    try:
        while not (state / "server.json").exists():  # written once it serves
            try:
                served.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"serve --no-owners ended with {served.returncode}: {served.communicate()[1]}")
        served.send_signal(signal.SIGTERM)
        out, err = served.communicate(timeout=120)
        assert served.returncode == 0, err
    finally:
        if served.poll() is None:
            os.killpg(served.pid, signal.SIGKILL)
            served.wait()

    secret = sorted(p.relative_to(state).as_posix() for p in state.rglob("*.key_secret"))
    assert secret == ["keys/server.key_secret"], secret  # no owner's, none unused in STATE/owners/
    assert {p.name: p.read_bytes() for p in (state / "keys" / "owners").iterdir()} == published
    admitted = allowlist(state)
    for owner in ("owner-1", "owner-2", "owner-3"):
        kit_key = zmq.auth.load_certificate(str(kits / owner / f"{owner}.key_secret"))[0]
        assert admitted[kit_key] == owner  # each owner connects with its kit's key, as before


def test_serve_starting_owners_on_a_state_made_with_kits_is_refused_naming_no_owners(tmp_path):
    market, state = tmp_path / "market.yaml", tmp_path / "state"
    market.write_text(yaml.safe_dump(MARKET))
    init = marketplace(
        "serve", str(market), "--state", str(state), "--init", "--kits", str(tmp_path / "kits"), cwd=tmp_path
    )
    assert init.wait(timeout=120) == 0
    served = marketplace("serve", str(market), "--state", str(state), cwd=tmp_path)
    out, err = served.communicate(timeout=120)
    assert served.returncode == 2, err
    assert (
        f"marketplace serve: {state}: the keys of owner-1, owner-2, owner-3 are in their own kits "
        "(made by serve --init --kits), not in the state: expected --no-owners" in err
    )
    assert not (state / "owners").exists() and not (state / "server.json").exists()
    # from Python too: serve(start_owners=True) on such a state is refused before anything starts
    import marketplace as api
    from marketplace.service.options import ServeOptionsError

    with pytest.raises(ServeOptionsError, match="are in their own kits .* expected --no-owners"):
        api.serve(market, state, endpoint=f"tcp://127.0.0.1:{free_port()}")
    assert not (state / "owners").exists() and not (state / "server.json").exists()
