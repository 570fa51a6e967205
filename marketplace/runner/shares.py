"""``marketplace shares``: a simulated scenario's parties as files of their own, and the market file
that describes them by a public schema.

A marketplace whose parties bring their own rows needs files to bring. For a demonstration, a test
or a benchmark this writes them from a simulated scenario: each owner's share as ``owner-<i>.csv``,
the consumer's target and test set as ``target.csv`` and ``test.csv``, and ``market.yaml``: the
scenario with its ``data`` section replaced by the public schema of those files (``data.schema``),
so that ``marketplace serve market.yaml --owner-data DIR`` serves them and no process ever builds
the simulated world again.

The schema's feature ranges must be public. They are taken from the scenario's own public bounds
when it has them (a sketch's box), else from the simulated rows, widened to whole numbers: in a
real consortium the parties agree on them without looking at anybody's rows, and the file says so.
"""

from __future__ import annotations

import copy
import csv
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from marketplace import plugins
from marketplace.data.dataset import Dataset
from marketplace.parties import make_world
from marketplace.scenario import Scenario
from marketplace.scenario.load import without_unused_settings

__all__ = ["write_shares"]


def write_shares(scenario: Scenario, out: str | Path) -> dict[str, Path]:
    """Write every party's own file and ``market.yaml`` into ``out`` (module docstring); returns
    the files written, by party (``market`` for the market file). ``out`` must be new or empty."""
    config = scenario.config
    if config.data.schema_only:
        raise ValueError(
            "data.schema: this scenario is already described by its public schema; shares are written "
            "from a simulated one (data.source)"
        )
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out {out}: expected a new or empty folder")
    world = make_world(config, plugins.exchange(config.protocol))
    out.mkdir(parents=True, exist_ok=True)
    parts = [*world.owners, world.validation, world.test]
    classes = sorted({int(v) for part in parts for v in np.unique(part.y)})
    group = None if world.validation.group_names == tuple(str(c) for c in classes) else "group"
    written: dict[str, Path] = {}
    for i, rows in enumerate(world.owners):
        written[f"owner-{i + 1}"] = _write_csv(out / f"owner-{i + 1}.csv", rows, group)
    written["target"] = _write_csv(out / "target.csv", world.validation, group)
    written["test"] = _write_csv(out / "test.csv", world.test, group)
    lower, upper = _public_ranges(scenario, parts)
    schema: dict[str, Any] = {
        "features": [
            {"name": name, "lower": lo, "upper": hi}
            for name, lo, hi in zip(world.validation.feature_names, lower, upper)
        ],
        "label": {"name": "label", "classes": classes},
    }
    if group is not None:
        schema["group"] = {"name": group, "values": list(world.validation.group_names)}
    if any(len(p) and ((p.X < lower).any() or (p.X > upper).any()) for p in parts):
        schema["outside"] = "clip"  # the public box is narrower than some rows: clip them, as the protocol would
    raw = without_unused_settings(copy.deepcopy(scenario.raw))
    raw["data"] = {"schema": schema, "consumer": raw["data"].get("consumer", {}), "seed_set": {"size": 0}}
    raw.pop("sweep", None)
    raw["description"] = (
        f"{config.name}'s parties as files of their own (written by `marketplace shares`): each "
        f"owner's rows in owner-<i>.csv, the consumer's target and test set in target.csv and "
        f"test.csv. The data are described by their public schema only."
    )
    text = (
        "# A marketplace described by the public schema of its parties' own files (marketplace shares).\n"
        "# The feature ranges below were taken from the simulated rows or the scenario's public bounds;\n"
        "# a real consortium agrees on them without looking at anybody's rows.\n" + yaml.safe_dump(raw, sort_keys=False)
    )
    (out / "market.yaml").write_text(text)
    written["market"] = out / "market.yaml"
    return written


def _write_csv(path: Path, rows: Dataset, group: str | None) -> Path:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*rows.feature_names, "label", *([group] if group else [])])
        for x, y, g in zip(rows.X.tolist(), rows.y.tolist(), rows.group.tolist()):
            writer.writerow([*(repr(v) for v in x), y, *([rows.group_names[g]] if group else [])])
    return path


def _public_ranges(scenario: Scenario, parts: list[Dataset]) -> tuple[list[float], list[float]]:
    """Per feature, the scenario's public box when its protocol section has one of the right width
    (``lower``/``upper``), else the rows' range widened to whole numbers."""
    section = scenario.raw.get(scenario.config.protocol) or {}
    dim = parts[0].dim
    lower, upper = section.get("lower"), section.get("upper")
    if isinstance(lower, list) and isinstance(upper, list) and len(lower) == len(upper) == dim:
        return [float(v) for v in lower], [float(v) for v in upper]
    X = np.vstack([p.X for p in parts if len(p)])
    lo, hi = X.min(axis=0), X.max(axis=0)
    return (
        [float(math.floor(v)) for v in lo],
        [float(math.ceil(v)) if math.ceil(v) > math.floor(a) else float(math.floor(a) + 1) for v, a in zip(hi, lo)],
    )
