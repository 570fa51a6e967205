"""What the runner computes with the whole world in view, for evaluation only: the references of the
same run (uniform sampling, exact-kernel centralized greedy) and a central replay of the protocol's
decision rule, which the distributed selection must match exactly."""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace import seeds
from marketplace.data.world import World
from marketplace.protocols.summarize import exact_kernel_greedy, mmd2, protocol_greedy, uniform_selection
from marketplace.protocols.summarize.consumer import evaluate_summary
from marketplace.protocols.summarize.identity import embedding_key, point_key
from marketplace.protocols.summarize.kernel import prefix_mmd2
from marketplace.protocols.summarize.public import public_features
from marketplace.roles import owner_id
from marketplace.scenario import ScenarioConfig


def _rows(world: World, picks: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    if not picks:
        return np.zeros((0, world.dim)), np.zeros(0, dtype=np.int64)
    X = np.stack([world.owners[o].X[r] for o, r in picks])
    y = np.array([world.owners[o].y[r] for o, r in picks], dtype=np.int64)
    return X, y


def mmd2_with_seed_set(config: ScenarioConfig, world: World, picks: list[tuple[int, int]]) -> float | None:
    """MMD^2 of D_init + summary to D_v: the quantity every greedy here actually minimizes (the
    headline ``mmd2`` scores the summary alone, as handed to the consumer). The two can rank
    methods differently: a greedy spends points balancing a far-away seed set."""
    X, _ = _rows(world, picks)
    both = np.vstack([world.seed_set.X, X])
    return float(mmd2(both, world.validation.X, config.summarize.gamma)) if len(both) else None


def _score(config: ScenarioConfig, world: World, picks: list[tuple[int, int]]) -> dict[str, Any]:
    X, y = _rows(world, picks)
    s = config.summarize
    scores = evaluate_summary(
        X,
        y,
        world.validation,
        world.test,
        gamma=s.gamma,
        svm_c=s.svm_c,
        svm_seed=seeds.derive_int(config.seed, "summarize.svm"),
    )
    return scores | {"mmd2_with_seed_set": mmd2_with_seed_set(config, world, picks), "size": len(picks)}


def baselines(config: ScenarioConfig, world: World) -> dict[str, dict[str, Any]]:
    """Metrics of each configured reference summary of p points."""
    s = config.summarize
    total = sum(len(o) for o in world.owners)
    p = min(s.rounds, total)
    out: dict[str, dict[str, Any]] = {}
    if "uniform" in s.baselines:
        picks = uniform_selection([len(o) for o in world.owners], p, seeds.rng(config.seed, "baseline.uniform"))
        out["uniform"] = _score(config, world, picks)
    if "exact_greedy" in s.baselines:
        pool = np.concatenate([o.X for o in world.owners])
        where = [(k, r) for k, o in enumerate(world.owners) for r in range(len(o))]
        chosen = exact_kernel_greedy(pool, world.validation.X, world.seed_set.X, p, s.gamma)
        out["exact_greedy"] = _score(config, world, [where[i] for i in chosen])
    return out


def _owner_keys(config: ScenarioConfig, world: World, index: int) -> list[str]:
    """The content key of every row of owner ``index``'s generated share, as the curator computes
    keys for the run's trust level."""
    data = world.owners[index]
    if config.summarize.curator == "less_trusted":  # the embedding as the owner sends it (batched, or one row)
        features = public_features(config, world.dim)
        return [embedding_key(phi) for phi in features.transform(data.X)] + [
            embedding_key(features.transform(x[None, :])[0]) for x in data.X
        ]
    return [point_key(x, int(y)) for x, y in zip(data.X, data.y)]


def _non_private_rule(
    config: ScenarioConfig, world: World, rounds: int, excluded_from: dict[int, int] | None = None
) -> list[tuple[int, int]]:
    """The non-private protocol's selection, computed centrally; ``excluded_from`` maps an owner's
    index to the round from which the curator went on without it."""
    features = public_features(config, world.dim)
    owner_phi = [features.transform(o.X) for o in world.owners]
    target_mean = features.transform(world.validation.X).mean(axis=0)
    seed_phi = features.transform(world.seed_set.X)
    return protocol_greedy(owner_phi, target_mean, seed_phi, rounds, excluded_from) if rounds else []


def exclusion_rounds(curator: dict[str, Any]) -> dict[str, int]:
    """Owner id -> the first round the curator ran without it, from its result: a dropout's
    recorded round (0, before the first round, counts as round 1) and a flagged owner's round
    (``flagged_rounds``). The round an owner was dropped in is already run without it: its bid,
    or the point it was asked for, did not count."""
    out = {
        str(o): max(1, int(r["round"]))
        for o, r in (curator.get("dropouts") or {}).items()
        if isinstance(r, dict) and isinstance(r.get("round"), int)
    }
    for owner, round_ in (curator.get("flagged_rounds") or {}).items():
        out[str(owner)] = min(out.get(str(owner), round_), max(1, int(round_)))
    return out


def non_private_greedy(config: ScenarioConfig, world: World) -> dict[str, Any]:
    """The reference a private run is measured against: the non-private protocol on the same data."""
    rounds = min(config.summarize.rounds, sum(len(o) for o in world.owners))
    return _score(config, world, _non_private_rule(config, world, rounds))


def central_replay(
    config: ScenarioConfig, world: World, selection: list[list[Any]], excluded: dict[str, int] | None = None
) -> dict[str, Any]:
    """Replay the protocol's rule in one place and compare with the distributed selection, point by
    point by content (a selection names a point by its owner's serial, not its row). ``excluded`` (owner id -> round,
    :func:`exclusion_rounds`) replays the dropouts: an owner takes no part from the round the
    curator went on without it. Not applicable when an owner's points are not the scenario's
    generated rows (an owner that read its own data file)."""
    if config.summarize.privacy.enabled:
        return {"applicable": False, "reason": "a private run's releases are noisy; see baselines.non_private_greedy"}
    rounds = len(selection)
    ids = [owner_id(i) for i in range(len(world.owners))]
    keys: dict[str, set[str]] = {}
    for entry in selection:
        owner = str(entry[0])
        if owner not in keys:
            keys[owner] = set(_owner_keys(config, world, ids.index(owner))) if owner in ids else set()
    foreign = sorted(owner for owner in keys if any(str(e[2]) not in keys[owner] for e in selection if e[0] == owner))
    if foreign:
        return {
            "applicable": False,
            "reason": f"{', '.join(foreign)} sent points that are not the scenario's rows (their own data files?)",
        }
    excluded_from = {ids.index(o): r for o, r in (excluded or {}).items() if o in ids}
    expected = _non_private_rule(config, world, rounds, excluded_from)
    got = [(str(e[0]), str(e[2])) for e in selection]
    key_lists = {o: _owner_keys(config, world, o) for o in {o for o, _ in expected}}
    want = [(owner_id(o), key_lists[o][r]) for o, r in expected]
    first_diff = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    if first_diff is None and len(got) != len(want):
        first_diff = min(len(got), len(want))
    return {
        "rounds": rounds,
        "matches": got == want,
        "first_difference": first_diff,
        "dropouts_replayed": {o: r for o, r in sorted((excluded or {}).items())},
    }


def mmd2_by_round(
    config: ScenarioConfig,
    world: World,
    selection: list[list[Any]],
    sent_rows: dict[str, list[int]] | None = None,
) -> tuple[list[float | None], str | None]:
    """MMD^2 (exact kernel, the summary alone, against the consumer's D_v: the report's
    ``metrics.mmd2``) of the summary after each round, from the selection order, with the world's
    rows: ``(values, None)``. ``sent_rows``: each owner's serial -> row map, where the simulator's view
    holds it (:func:`selected_rows`). When a selected point is none of the scenario's rows (an owner
    that read its own data file), the values are unknown: ``([None, ...], why)``."""
    picks, why = selected_rows(config, world, selection, sent_rows)
    if picks is None:
        return [None] * len(selection), why
    X, _ = _rows(world, picks)
    return [float(v) for v in prefix_mmd2(X, world.validation.X, config.summarize.gamma)], None


def selected_rows(
    config: ScenarioConfig,
    world: World,
    selection: list[list[Any]],
    sent_rows: dict[str, list[int]] | None = None,
) -> tuple[list[tuple[int, int]] | None, str | None]:
    """The world row of each selected point, as (owner index, row), and None; or None and why, when a
    point is none of the scenario's rows (an owner that read its own data file).

    A selection names a point by its owner's serial (the k-th point it handed over), never by its row,
    and the serial is never read as a row here. The row comes from the owner's own serial -> row map
    (``sent_rows``: its result's ``sent_rows``, which only the simulator's view holds), checked
    against the point's content key; without that map (a deployment's report: each owner kept its
    own), or when the map does not name a row with that key (an owner that sent another number), from
    the content key alone, the first row of the owner's generated share that has it."""
    ids = {owner_id(i): i for i in range(len(world.owners))}
    rows_of: dict[str, dict[str, list[int]]] = {}
    picks = []
    for entry in selection:
        owner, serial, key = str(entry[0]), entry[1], str(entry[2])
        index = ids.get(owner)
        if index is not None and owner not in rows_of:
            rows_of[owner] = _rows_by_key(config, world, index)
        rows = rows_of[owner].get(key) if index is not None else None
        if index is None or not rows:
            return None, f"{owner} sent points that are not the scenario's rows (its own data file?)"
        mapped = (sent_rows or {}).get(owner) or []
        known = isinstance(serial, int) and not isinstance(serial, bool) and 0 <= serial < len(mapped)
        picks.append((index, mapped[serial] if known and mapped[serial] in rows else rows[0]))
    return picks, None


def _rows_by_key(config: ScenarioConfig, world: World, index: int) -> dict[str, list[int]]:
    """Content key -> the rows of owner ``index``'s generated share that have it (:func:`_owner_keys`)."""
    n = len(world.owners[index])
    out: dict[str, list[int]] = {}
    for i, key in enumerate(_owner_keys(config, world, index)):
        if i % n not in out.setdefault(key, []):
            out[key].append(i % n)
    return out
