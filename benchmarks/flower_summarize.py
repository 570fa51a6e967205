"""The `summarize` rounds written as a Flower app (a ServerApp and a ClientApp, Message API).

Used by ``bench_flower.py`` with both of Flower's engines: the simulation engine (Ray) and the
deployment engine (a SuperLink and SuperNodes), where this file is shipped inside the Flower App.
The maths are ours (:mod:`marketplace.protocols.summarize`): the h1 features, the owner's
``best_offer``, the curator's ``bid_direction``, its check with ``bid_value`` and its update of
the summary, so the selection can be compared with ``marketplace run``'s point for point.

One round: the ServerApp sends the direction g to every client (``query.bid``), each client
answers with one bid (the best of its unsent points), and the ServerApp asks the best bidder only
(``query.point``; equal bids go to the lower owner index, as our curator does) for its point,
checks the point's bid and adds it to the summary. Which world to build comes from the environment
variable ``FLOWER_BENCH``: JSON ``{"owners": K, "rounds": P, "out": "selection.json"}``; the
ServerApp writes the selection and the instants each round ended to ``out``, or to the run config's
``out`` when the run sets one (many runs on one SuperLink, ``bench_flower_serve.py``).
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from marketplace import plugins

ENV = "FLOWER_BENCH"
SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.yaml"


def bench_settings() -> dict[str, Any]:
    """The run's settings from ``FLOWER_BENCH`` (owners, rounds, out, scenario)."""
    raw = os.environ.get(ENV)
    if not raw:
        raise RuntimeError(f"{ENV} is not set: expected JSON with owners, rounds and out, got nothing")
    return json.loads(raw)


def scenario_overrides(owners: int, rounds: int) -> dict[str, Any]:
    """What changes in scenarios/quickstart.yaml for a benchmark run with ``owners`` and ``rounds``."""
    return {
        "parties.owners": owners,
        "data.partition.scheme": "even",
        "summarize.rounds": rounds,
        "summarize.baselines": [],
    }


@functools.lru_cache(maxsize=1)
def world_and_features(owners: int, rounds: int, scenario: str) -> tuple[Any, Any]:
    """The world ``marketplace run`` builds for this scenario, and its public h1 features (built once
    per process)."""
    import marketplace
    from marketplace.parties import make_world
    from marketplace.protocols.summarize.public import public_features

    config = marketplace.load(scenario, scenario_overrides(owners, rounds)).config
    world = make_world(config, plugins.exchange(config.protocol))
    return world, public_features(config, world.dim)


@functools.cache
def owner_embedding(owners: int, rounds: int, scenario: str, index: int) -> tuple[np.ndarray, Any]:
    """h1 of owner ``index``'s rows (computed once per process and owner) and its duplicate groups."""
    from marketplace.protocols.summarize.identity import duplicate_groups

    world, features = world_and_features(owners, rounds, scenario)
    data = world.owners[index]
    return features.transform(data.X), duplicate_groups(data.X, data.y)


def _settings_key(settings: dict[str, Any]) -> tuple[int, int, str]:
    return int(settings["owners"]), int(settings["rounds"]), str(settings.get("scenario", SCENARIO))


# --- the client: one owner --------------------------------------------------------------------

client_app = ClientApp()


def _owner_state(context: Context) -> tuple[int, np.ndarray, np.ndarray, Any, ConfigRecord]:
    """This node's owner index, its h1 features, its unsent-row mask, its duplicate groups and the
    record of its sent rows (kept in the node's context between messages)."""
    settings = bench_settings()
    index = int(context.node_config["partition-id"])
    phi, groups = owner_embedding(*_settings_key(settings), index)
    if "owner" not in context.state.config_records:
        context.state.config_records["owner"] = ConfigRecord({"sent": [], "offer": -1})
    record = context.state.config_records["owner"]
    available = np.ones(len(phi), dtype=bool)
    for row in record["sent"]:
        available[row] = False
        if groups is not None:
            available[groups == groups[row]] = False
    return index, phi, available, groups, record


@client_app.query("bid")
def bid(message: Message, context: Context) -> Message:
    """The owner's bid for the round's direction: the best of its unsent points."""
    from marketplace.protocols.summarize import best_offer

    index, phi, available, _, record = _owner_state(context)
    direction = message.content.array_records["g"]["g"].numpy()
    best = best_offer(phi, direction, available)
    row, value = best if best is not None else (-1, 0.0)
    record["offer"] = row
    reply = ConfigRecord({"owner": index, "bid": float(value), "available": best is not None})
    return Message(RecordDict({"bid": reply}), reply_to=message)


@client_app.query("point")
def point(message: Message, context: Context) -> Message:
    """The point behind this round's bid, handed over because the server asked for it."""
    settings = bench_settings()
    index, _, _, _, record = _owner_state(context)
    row = int(record["offer"])
    if row < 0:
        raise RuntimeError(f"owner {index}: asked for a point, expected an open offer, got none")
    record["sent"] = [*record["sent"], row]
    record["offer"] = -1
    world, _ = world_and_features(*_settings_key(settings))
    data = world.owners[index]
    content = RecordDict(
        {
            "x": ArrayRecord({"x": Array(np.asarray(data.X[row], dtype=np.float64))}),
            "meta": ConfigRecord({"owner": index, "row": row, "y": int(data.y[row])}),
        }
    )
    return Message(content, reply_to=message)


# --- the server: the curator ------------------------------------------------------------------

server_app = ServerApp()


def _replies(grid: Grid, messages: list[Message]) -> list[Message]:
    replies = list(grid.send_and_receive(messages))
    failed = [r for r in replies if r.has_error()]
    if failed or len(replies) != len(messages):
        raise RuntimeError(
            f"expected {len(messages)} replies without error, got {len(replies)} "
            f"({len(failed)} errors: {[r.error.reason for r in failed[:3]]})"
        )
    return replies


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """The curator's rounds: g to every client, one bid from each, the best bidder's point."""
    from marketplace.protocols.summarize import bid_direction, bid_value

    settings = bench_settings()
    owners, rounds, scenario = _settings_key(settings)
    world, features = world_and_features(owners, rounds, scenario)
    target_mean = features.transform(world.validation.X).mean(axis=0)
    seed_phi = features.transform(world.seed_set.X)
    summary_sum, q = seed_phi.sum(axis=0), len(seed_phi)
    nodes = list(grid.get_node_ids())
    while len(nodes) < owners:  # the deployment engine's SuperNodes may still be registering
        time.sleep(0.5)
        nodes = list(grid.get_node_ids())
    selection: list[list[Any]] = []
    round_ends: list[float] = []
    started = time.perf_counter()
    for round_no in range(1, rounds + 1):
        summary_mean = summary_sum / q if q else np.zeros_like(summary_sum)
        direction = bid_direction(target_mean, summary_mean, q)
        g = RecordDict({"g": ArrayRecord({"g": Array(direction)})})
        replies = _replies(grid, [Message(g, dst_node_id=n, message_type="query.bid") for n in nodes])
        node_of = {int(r.content.config_records["bid"]["owner"]): r.metadata.src_node_id for r in replies}
        offers = sorted(
            (-float(b["bid"]), int(b["owner"]))
            for b in (r.content.config_records["bid"] for r in replies)
            if b["available"]
        )  # best bid first; equal bids go to the lower owner index
        if not offers:
            break
        claimed, best_owner = -offers[0][0], offers[0][1]
        ask = Message(RecordDict(), dst_node_id=node_of[best_owner], message_type="query.point")
        reply = _replies(grid, [ask])[0]
        meta = reply.content.config_records["meta"]
        phi = features.transform(reply.content.array_records["x"]["x"].numpy()[None, :])[0]
        actual = bid_value(phi, direction)
        if abs(actual - claimed) > 1e-9 * max(1.0, abs(claimed)):
            raise RuntimeError(
                f"round {round_no}: owner {best_owner}'s point bids {actual!r}, expected its claimed {claimed!r}"
            )
        summary_sum, q = summary_sum + phi, q + 1
        selection.append([f"owner-{int(meta['owner']) + 1}", int(meta["row"])])
        round_ends.append(time.perf_counter())
    out = str(context.run_config.get("out") or "") or settings["out"]  # a run's own file, when it names one
    Path(out).write_text(
        json.dumps(
            {
                "selection": selection,
                "round_ends": round_ends,
                "started": started,
                "nodes": len(nodes),
                "finished_at": time.time(),  # wall clock: comparable with the submitter's, on the same machine
            }
        )
    )
