"""The configuration fingerprint: what every party's scenario must agree on, in a few short lines.

Each party builds its own data share and public randomness from the scenario file and the seed. A
party started with another seed, another ``parties.owners`` or another data section would compute a
different world, and nothing in the messages would show it: a consumer with another seed would
build its summary against the wrong target. So every ``hello`` carries :func:`fingerprint` of the
sender's resolved scenario, and the curator refuses a party whose fingerprint differs from its own,
naming the parts that differ.

The parts are the run's name, protocol, seed and number of owners (in the clear, so an error can
show both values), and a short hash of each section that shapes the run: ``data`` and the
protocol's own section (``summarize``, ``sketch``, ``stc`` or ``pfds``). ``transport`` and
``sweep`` are left out (parties differ there legitimately: key folders, endpoints), and so are file
locations, which differ between machines: only a path's file name counts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePath
from typing import Any

from marketplace.memo import IdentityMemo
from marketplace.schema import to_plain

__all__ = ["differences", "fingerprint"]

PATH_KEYS = frozenset({"path", "root", "file", "folder"})


def _without_locations(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: _without_locations(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_locations(v) for v in value]
    if key in PATH_KEYS and isinstance(value, str):
        return PurePath(value).name
    return value


_DIGESTS: IdentityMemo[str] = IdentityMemo(16)
"""Digests of the frozen sections last fingerprinted: a served marketplace fingerprints every session's
scenario several times (the curator's hello, its report, the report check), and its sessions share
their data and protocol sections."""


def _digest(value: Any) -> str:
    """:func:`_section_digest` of ``value``, computed once per frozen section object (a built
    scenario's configuration is read only, as every cache of it assumes)."""
    params = getattr(type(value), "__dataclass_params__", None)  # a dataclass instance's
    if params is None or not params.frozen:
        return _section_digest(value)
    return _DIGESTS.get((value,), lambda: _section_digest(value))


def _section_digest(value: Any) -> str:
    text = json.dumps(_without_locations(to_plain(value)), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fingerprint(config: Any) -> dict[str, str]:
    """The parts of ``config`` (a :class:`ScenarioConfig`) every party must agree on."""
    return {
        "name": str(config.name),
        "protocol": str(config.protocol),
        "seed": str(config.seed),
        "owners": str(config.parties.owners),
        "data": _digest(config.data),
        config.protocol: _digest(getattr(config, config.protocol)),
    }


def differences(mine: dict[str, str], theirs: dict[str, str]) -> str | None:
    """None when the fingerprints agree; otherwise one line naming each part that differs, with
    both values for the parts kept in the clear."""
    if not theirs:
        return "it sent no configuration fingerprint (an older marketplace?)"
    parts = sorted(set(mine) | set(theirs))
    differ = [p for p in parts if mine.get(p) != theirs.get(p)]
    if not differ:
        return None
    shown = []
    for part in differ:
        if part in ("name", "protocol", "seed", "owners"):
            shown.append(f"{part} (curator: {mine.get(part)!s:.40}, this party: {theirs.get(part)!s:.40})")
        else:
            shown.append(f"{part} section" if part in mine and part in theirs else f"{part} (only on one side)")
    return "its scenario differs from the curator's in " + ", ".join(shown)
