"""Small market files for the market tests: one sketch marketplace on a generated mixture."""

from __future__ import annotations

import copy
from typing import Any

SCENARIO = {
    "data": {
        "source": {
            "kind": "covariate_shift",
            "covariate_shift": {"dim": 2, "components": 3, "rows_per_component": 600},
        },
        "partition": {"scheme": "by_group", "skew": 0.5},
        "consumer": {"target_groups": [0], "validation_size": 8, "test_size": 10},
        "seed_set": {"size": 0},
    },
    "sketch": {
        "lower": [-12, -12],
        "upper": [12, 12],
        "map": {"kind": "rff", "features": 20, "sigma": 0.5},
        "samples": 500,
        "queries": {"random_counts": 2, "rank_owners": False},
    },
    "transport": {"heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 5.0, "start_timeout_s": 60.0},
}


def sketch_request(consumer: str, epsilon: float, **more: Any) -> dict[str, Any]:
    """A sketch request whose owners each declare a cost of eps = ``epsilon``."""
    return {"consumer": consumer, "protocol": "sketch", "sketch": {"epsilon": epsilon}, **more}


def market(requests: list[dict[str, Any]], *, owners: int = 2, budget: float = 1.0, **settings: Any) -> dict[str, Any]:
    """A market mapping: ``owners`` owners with lifetime budget eps = ``budget`` (basic filter) and
    the given ``requests`` on the small sketch marketplace; ``settings`` join ``market:``."""
    return {
        "market": {
            "name": "tiny-market",
            "seed": 5,
            "owners": owners,
            "budget": {"epsilon": budget, "delta": 0.0},
            **settings,
        },
        "scenario": copy.deepcopy(SCENARIO),
        "requests": copy.deepcopy(requests),
    }


HAND_STREAM = [sketch_request("a", 0.6), sketch_request("b", 0.3), sketch_request("c", 0.2), sketch_request("d", 0.5)]
"""Four requests against owners of budget 1 (see tests of the rules for the admissions by hand)."""
