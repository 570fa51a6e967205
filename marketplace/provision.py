"""One credential kit per party: what a party needs to join a run, and nothing of anyone else's.

``marketplace provision SCENARIO --out kits/`` makes fresh CURVE certificates for every party of
the scenario and writes one folder per party::

    kits/owner-1/
      owner-1.key_secret   its own certificate (secret and public key): keep it private
      owner-1.noise_key    its own noise key: every noise stream of the party derives from it and the
                           run seed, so no other party can recompute (and strip) its noise
      curator.key          the public key of the curator it connects to
      scenario.yaml        the scenario, resolved (the same in every kit)
      start.sh             its start command
      kit.json             who it is for, the run id, the scenario's fingerprint, the command
      owner-1.ledger.sqlite  its lifetime ledger, once it charged a run (a scenario with lifetime
                           ledgers: every party keeps its own in its kit folder)

The folder is flat, so that it is also the party's key folder (``--keys kits/owner-1``) and maps
one to one onto a Kubernetes Secret.

The curator's kit holds its own certificate and the *public* keys of every other party (its
allowlist); an owner's or the consumer's kit holds its own certificate and the curator's public key.
No kit holds another party's secret key or noise key, so each kit can be handed to its party alone
(another site, a container volume, a Kubernetes Secret). ``shared_noise=True`` (``--shared-noise``)
writes no noise keys and sets ``noise.source: seed`` in the kits' scenario instead: every party can
then recompute every other party's noise from the run seed, which each kit's ``kit.json`` and every
report of the run say. Each provisioning draws a new run id, so reports
of parties holding kits of different provisionings are refused by ``marketplace assemble``.

FLARE's and Flower's provisioning work the same way: one identity kit per participant.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
import zmq.auth

from marketplace.parties import party_ids, role_of
from marketplace.privacy import noise as noise_keys
from marketplace.roles import CURATOR
from marketplace.runtime import scenario_identity
from marketplace.scenario import Scenario
from marketplace.version import __version__

DEFAULT_ENDPOINT = "tcp://curator:5555"
KIT_FILES = ("kit.json", "scenario.yaml", "start.sh")
SHARED_NOISE_WARNING = (
    "shared noise: this kit has no noise key of its own; every party's noise derives from the run "
    "seed alone, which every kit holds, so any party can recompute and strip any other party's noise"
)


class ProvisionError(ValueError):
    """A kit that cannot be written as asked (the message names the folder or option)."""


@dataclass(frozen=True)
class Kit:
    """One party's kit, as written."""

    party: str
    folder: Path
    command: tuple[str, ...]


def parse_owner(text: str) -> tuple[int, int]:
    """``UID`` or ``UID:GID`` (numbers) for :func:`provision`'s ``chown``; the group defaults to the uid."""
    uid, _, gid = text.partition(":")
    try:
        pair = int(uid), int(gid or uid)
    except ValueError:
        raise ProvisionError(f"--chown: expected UID or UID:GID as numbers (e.g. 1000:1000), got {text!r}") from None
    if min(pair) < 0:
        raise ProvisionError(f"--chown: expected non-negative ids, got {text!r}")
    return pair


def check_endpoint(endpoint: str, option: str, *, any_port: bool = False) -> str:
    """``endpoint`` if it reads ``tcp://HOST:PORT`` (port 0 too when ``any_port``: the curator picks one)."""
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    if not endpoint.startswith("tcp://") or not host:
        raise ProvisionError(f"{option}: expected tcp://HOST:PORT, got {endpoint!r}")
    if not port.isdigit() or not (0 if any_port else 1) <= int(port) < 65536:
        raise ProvisionError(
            f"{option}: expected a port number {'0' if any_port else '1'}-65535 after the host, got {port!r} in "
            f"{endpoint!r}"
        )
    return endpoint


def bind_endpoint(endpoint: str) -> str:
    """Where the curator listens for parties that reach it at ``endpoint``: every interface, same port."""
    return "tcp://0.0.0.0:" + check_endpoint(endpoint, "--endpoint").rsplit(":", 1)[1]


def provision(
    scenario: Scenario,
    out: str | Path,
    *,
    endpoint: str = DEFAULT_ENDPOINT,
    bind: str | None = None,
    run_id: str | None = None,
    overwrite: bool = False,
    chown: tuple[int, int] | None = None,
    shared_noise: bool = False,
) -> list[Kit]:
    """Write one kit per party of ``scenario`` under ``out`` (see the module docstring).

    ``endpoint`` is where owners and the consumer reach the curator; ``bind`` where the curator
    listens (default: every interface, the endpoint's port). ``run_id`` defaults to the scenario's
    name and seed plus a random suffix. An existing kit is refused unless ``overwrite``; its old keys
    are then removed, so a curator never keeps allowlisting a key of an earlier provisioning.
    ``chown`` gives every file to that (uid, gid), e.g. the user a container runs as (needs root).
    Each kit gets a fresh noise key of its own, unless ``shared_noise`` (see the module docstring).
    """
    bind = check_endpoint(bind, "--bind", any_port=True) if bind else bind_endpoint(endpoint)
    check_endpoint(endpoint, "--endpoint")
    config = scenario.config
    run_id = run_id or f"{config.name}-seed{config.seed}-{secrets.token_hex(4)}"
    out = Path(out)
    parties = party_ids(config)
    for party in parties:
        _check_free(out / party, overwrite)
    text = _kit_scenario(scenario, shared_noise, run_id)
    identity = scenario_identity(scenario)
    kits = []
    with tempfile.TemporaryDirectory(prefix="marketplace-keys-") as tmp:  # 0700: made by mkdtemp
        certificates = {p: zmq.auth.create_certificates(tmp, p) for p in parties}
        publics = {p: zmq.auth.load_certificate(certificates[p][0])[0].decode("ascii") for p in parties}
        for party in parties:
            known = [p for p in parties if p != party] if party == CURATOR else [CURATOR]
            folder = out / party
            _prepare(folder)
            _install(Path(certificates[party][1]), folder / f"{party}.key_secret", 0o600)
            if not shared_noise:
                noise_keys.write_key(folder, party)
            for other in known:
                _install(Path(certificates[other][0]), folder / f"{other}.key", 0o644)
            command = _command(party, bind if party == CURATOR else endpoint, run_id)
            _write(folder / "scenario.yaml", text, 0o644)
            _write(folder / "start.sh", _start_script(party, command), 0o755)
            manifest = _manifest(
                party, run_id, identity, command, known, publics, bind if party == CURATOR else endpoint, shared_noise
            )
            _write(folder / "kit.json", json.dumps(manifest, indent=2) + "\n", 0o644)
            if chown is not None:
                _chown_tree(folder, chown)
            kits.append(Kit(party, folder, tuple(command)))
    return kits


def prepare_reports(folder: str | Path, scenario: Scenario, chown: tuple[int, int] | None = None) -> Path:
    """Make ``folder`` ready for this run's party reports: created, emptied of the reports an earlier
    run left there (``<party>.json`` for this scenario's parties), given to ``chown``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for party in party_ids(scenario.config):
        (folder / f"{party}.json").unlink(missing_ok=True)
    if chown is not None:
        os.chown(folder, *chown)
    return folder


def _kit_scenario(scenario: Scenario, shared_noise: bool, run_id: str) -> str:
    """The scenario as each kit carries it: resolved, without the provisioning machine's key folders,
    with ``noise.source`` set to ``keys`` (each party's own key file), or ``seed`` when asked for.
    With lifetime ledgers, each party keeps its ledger in its own kit folder (``lifetime.ledgers:
    .``), and the run is charged under its run id unless the scenario names a request id."""
    raw = json.loads(json.dumps(scenario.raw))
    transport = raw.get("transport")
    if isinstance(transport, dict):
        transport.pop("curve_keys", None)
    raw["noise"] = {"source": "seed" if shared_noise else "keys", "keys": None}
    life = raw.get("lifetime")
    if isinstance(life, dict) and life.get("ledgers") is not None:
        life["ledgers"] = "."
        life["request_id"] = life.get("request_id") or run_id
    return "# written by `marketplace provision`: the same scenario in every kit of this run\n" + yaml.safe_dump(
        raw, sort_keys=False
    )


def _command(party: str, endpoint: str, run_id: str) -> list[str]:
    """The party's start command, with paths relative to its kit folder."""
    role = role_of(party)
    command = ["marketplace", role]
    if role == "owner":
        command += ["--id", party]
    return command + ["--scenario", "scenario.yaml", "--keys", ".", "--endpoint", endpoint, "--run-id", run_id]


def _start_script(party: str, command: list[str]) -> str:
    """A POSIX shell script that runs ``command`` with the kit's paths made absolute, from any folder.
    ``MARKETPLACE_ENDPOINT`` overrides the curator's address (not the curator's own bind address);
    extra arguments are passed on (e.g. --report)."""
    kit = {"scenario.yaml": '"$kit/scenario.yaml"', ".": '"$kit"'}
    endpoint = command[command.index("--endpoint") + 1]
    words = []
    for word in command:
        if word in kit:
            words.append(kit[word])
        elif word == endpoint and party != CURATOR:
            words.append(f'"${{MARKETPLACE_ENDPOINT:-{endpoint}}}"')
        else:
            words.append(shlex.quote(word))
    override = "" if party == CURATOR else " MARKETPLACE_ENDPOINT overrides the curator's address."
    return (
        "#!/bin/sh\n"
        f"# {party}'s start command, written by `marketplace provision`; run it from any folder.\n"
        f"# Its report goes to parties/{party}.json under the current folder unless you pass --report FILE;\n"
        f"# other arguments are passed on too.{override}\n"
        'kit=$(cd "$(dirname "$0")" && pwd)\n'
        f'exec {" ".join(words)} "$@"\n'
    )


def _manifest(
    party: str,
    run_id: str,
    identity: dict[str, Any],
    command: list[str],
    known: list[str],
    publics: dict[str, str],
    endpoint: str,
    shared_noise: bool,
) -> dict[str, Any]:
    noise = (
        {"source": "the run seed (shared by every kit)", "warning": SHARED_NOISE_WARNING}
        if shared_noise
        else {"source": f"the run seed and {party}.noise_key", "who_can_strip": f"only whoever holds {party}.noise_key"}
    )
    own_noise = (
        {}
        if shared_noise
        else {
            f"{party}.noise_key": "this party's noise key, SECRET: whoever reads it can strip "
            "this party's privacy noise"
        }
    )
    return {
        "party": party,
        "role": role_of(party),
        "run_id": run_id,
        "scenario": identity,
        "endpoint": endpoint,
        "command": command,
        "command_runs_in": "this kit's folder (start.sh runs it from anywhere)",
        "own_public_key": publics[party],
        "public_keys": {p: publics[p] for p in known},
        "noise": noise,
        "files": {
            f"{party}.key_secret": "this party's certificate, with its SECRET key: give it to no one",
            **own_noise,
            **{f"{p}.key": f"{p}'s public key" for p in known},
            "scenario.yaml": "the run's scenario",
            "start.sh": "the start command",
        },
        "made_by": f"marketplace {__version__} provision",
    }


def _check_free(folder: Path, overwrite: bool) -> None:
    if folder.exists() and not folder.is_dir():
        raise ProvisionError(f"{folder}: exists and is not a folder")
    existing = [name for name in KIT_FILES if (folder / name).exists()] + sorted(
        p.name for pattern in ("*.key_secret", "*" + noise_keys.SUFFIX) for p in folder.glob(pattern)
    )
    if existing and not overwrite:
        raise ProvisionError(
            f"{folder}: already holds a kit ({', '.join(existing)}): refusing to overwrite it (pass --force)"
        )


def _prepare(folder: Path) -> None:
    """Create the kit folder (0700); clear an old kit's keys but keep the folder, which may be a
    mount point (a container volume)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    for old in [*folder.glob("*.key"), *folder.glob("*.key_secret"), *folder.glob("*" + noise_keys.SUFFIX)]:
        old.unlink()


def _install(source: Path, target: Path, mode: int) -> None:
    _write(target, source.read_text(encoding="ascii"), mode)


def _write(path: Path, text: str, mode: int) -> None:
    """Write ``text`` with ``mode`` from the start (never briefly readable by others), atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, mode)  # the process umask may have narrowed it
    os.replace(tmp, path)


def _chown_tree(folder: Path, owner: tuple[int, int]) -> None:
    os.chown(folder, *owner)
    for path in folder.rglob("*"):
        os.chown(path, *owner, follow_symlinks=False)


def chown_like(out: Path, reference: Path) -> None:
    """Give ``out``, its parent folder and everything in ``out`` to the owner of ``reference``.

    For a container that writes into a host folder (``marketplace assemble`` in docker-compose): it
    runs as root, so that it can write whatever the host user's uid, and then hands its files to the
    host user, taken as the owner of a host folder it can see (``./scenarios``). The parent is
    included because Docker creates a missing bind-mount folder as root."""
    stat = reference.stat()
    owner = (stat.st_uid, stat.st_gid)
    for path in [out.parent, out, *out.rglob("*")]:
        os.chown(path, *owner, follow_symlinks=False)
