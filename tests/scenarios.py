"""The small scenarios the tests run, one parameterised builder per protocol, and the helpers that
turn a raw scenario into a configuration, a run or a file in a test's temporary folder.

Each builder returns a fresh dict (the caller may change it), the same scenario every time for the
same arguments; a test that needs another scenario passes the difference as an argument (or edits
the dict it got), so every test states what it runs. Tests import this module as a top-level
module (``from scenarios import stc_raw``), like tests/conftest.py's helpers.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

TRANSPORT = {"heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 5.0, "start_timeout_s": 30.0}
"""Short heartbeats and a start bound that load on the machine does not break: a lost party is seen
within seconds, a slow start is not mistaken for one."""

PRIVATE_SUMMARIZE = {"enabled": True, "t_init": 200, "t_sub": 5, "eps_auction": 0.5, "tau": 3}
"""The privacy section of :func:`private_tiny_raw`."""


def _transport(transport: bool) -> dict[str, Any]:
    return {"transport": copy.deepcopy(TRANSPORT)} if transport else {}


def tiny_raw(**summarize: Any) -> dict:
    """A summarize scenario small enough for brute force: 3 owners, a 3-D mixture, few rows
    (``summarize`` options override its section). The ``tiny_scenario`` fixture is this."""
    return {
        "name": "tiny",
        "protocol": "summarize",
        "seed": 11,
        "parties": {"owners": 3},
        "data": {
            "source": {
                "kind": "covariate_shift",
                "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 40},
            },
            "partition": {"scheme": "by_group", "skew": 0.7},
            "consumer": {"target_groups": [0], "target_share": 0.5, "validation_size": 8, "test_size": 10},
            "seed_set": {"groups": [3], "size": 4},
        },
        "summarize": {"rounds": 6, "gamma": 0.5, "features": 30, "baselines": [], **summarize},
        "transport": copy.deepcopy(TRANSPORT),
    }


def private_tiny_raw(**privacy: Any) -> dict:
    """The tiny scenario with private summarize over 8 rounds, on more rows (120 per component) and
    a larger validation and test set (30, 20); ``privacy`` options override
    :data:`PRIVATE_SUMMARIZE`."""
    raw = tiny_raw(rounds=8, features=40, privacy={**PRIVATE_SUMMARIZE, **privacy})
    raw["data"]["source"]["covariate_shift"]["rows_per_component"] = 120
    raw["data"]["consumer"].update(validation_size=30, test_size=20)
    return raw


def stc_raw(
    name: str = "stc-tiny",
    *,
    n_source: int = 400,
    n_target: int = 300,
    validation_size: int = 280,
    transport: bool = True,
    **stc: Any,
) -> dict:
    """An stc scenario: 2 owners sharing the source of ``stc_synthetic`` #2 (``n_source`` rows), the
    consumer nearly all of its target (``n_target`` rows, ``validation_size`` of them as T), NNA
    releases choosing k=6 points in the unit box; ``stc`` options override that section, and
    ``transport=False`` leaves the transport section out (the defaults)."""
    return {
        "name": name,
        "protocol": "stc",
        "seed": 5,
        "parties": {"owners": 2},
        "data": {
            "source": {
                "kind": "stc_synthetic",
                "stc_synthetic": {"which": 2, "n_source": n_source, "n_target": n_target},
            },
            "partition": {"scheme": "even", "groups": [0]},
            "consumer": {
                "target_groups": [1],
                "target_share": 0.99,
                "validation_size": validation_size,
                "test_size": 5,
            },
            "seed_set": {"size": 0},
        },
        "stc": {"release": "nna", "k": 6, "domain": {"low": [0.0], "high": [1.0]}, **stc},
        **_transport(transport),
    }


def sketch_raw(
    name: str = "sketch-tiny",
    *,
    owners: int = 3,
    dim: int = 3,
    components: int = 4,
    validation_size: int = 50,
    test_size: int = 30,
    features: int = 60,
    transport: bool = True,
    **sketch: Any,
) -> dict:
    """A sketch scenario: ``owners`` owners of a ``dim``-D mixture of ``components`` groups (300 rows
    each), the box [-10, 10]^dim, a random-Fourier map of ``features`` features, eps 2 and 3000
    samples, 2 moment and 4 random-count queries; ``sketch`` options override that section, and
    ``transport=False`` leaves the transport section out (the defaults)."""
    return {
        "name": name,
        "protocol": "sketch",
        "seed": 3,
        "parties": {"owners": owners},
        "data": {
            "source": {
                "kind": "covariate_shift",
                "covariate_shift": {"dim": dim, "components": components, "rows_per_component": 300},
            },
            "partition": {"scheme": "by_group", "skew": 0.8},
            "consumer": {"target_groups": [0], "validation_size": validation_size, "test_size": test_size},
            "seed_set": {"size": 0},
        },
        "sketch": {
            "lower": [-10] * dim,
            "upper": [10] * dim,
            "map": {"kind": "rff", "features": features, "sigma": 0.5},
            "epsilon": 2.0,
            "samples": 3000,
            "queries": {"moments": 2, "random_counts": 4},
            **sketch,
        },
        **_transport(transport),
    }


def pfds_raw(name: str = "pfds-tiny", *, owners: int = 3, rows: int = 900, transport: bool = True, **pfds: Any) -> dict:
    """A pfds scenario: ``owners`` owners sharing ``rows`` rows of the synthetic table, eps 1, trees of
    height 5, 5 folds; ``pfds`` options override that section, and ``transport=False`` leaves the
    transport section out (the defaults)."""
    return {
        "name": name,
        "protocol": "pfds",
        "seed": 4,
        "parties": {"owners": owners},
        "data": {"source": {"kind": "table", "table": {"dataset": "synthetic", "synthetic": {"rows": rows}}}},
        "pfds": {"epsilon": 1.0, "h_max": 5, "folds": 5, "max_leaves": 256, **pfds},
        **_transport(transport),
    }


# --- a raw scenario in a test's folder ------------------------------------------------------------


def parsed(raw: dict, folder: Path, source: str = "t"):
    """``raw`` parsed as a scenario read from ``source``, relative paths taken from ``folder``."""
    from marketplace.scenario import parse_scenario

    return parse_scenario(raw, source=source, base_dir=folder)


def config_of(raw: dict, folder: Path, source: str = "t"):
    """The typed configuration of ``raw`` (:func:`parsed`)."""
    return parsed(raw, folder, source).config


def run_raw(
    raw: dict, folder: Path, name: str = "run", *, driver: str = "inprocess", source: str | None = None
) -> dict:
    """Run ``raw`` into ``folder/name`` with ``driver`` and return its report (the scenario's source
    is ``source``, else ``name``). Each call is a run of its own: a test that only reads the report
    of a scenario other tests run too takes it from the ``run_cache`` fixture instead."""
    from marketplace.runner.run import run_scenario

    return run_scenario(parsed(raw, folder, source or name), folder / name, driver=driver)


def write_scenario(folder: Path, raw: dict, name: str = "tiny.yaml") -> Path:
    """``raw`` written as the YAML file ``folder/name``, for the command line; returns its path."""
    path = folder / name
    path.write_text(yaml.safe_dump(raw))
    return path
