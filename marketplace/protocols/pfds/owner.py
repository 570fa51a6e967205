"""The agents of `pfds`: a sharer (an owner) and, in :mod:`marketplace.consumer.pfds`, the consumer.

Every agent receives the other sharers' trees and labelled synthetic records from the curator,
checks each against the public schema, and, once told to train and shut down, fits its model on
its own rows plus every synthetic record it received (after its ``bye``: :meth:`PfdsAgent.finish`). A **sharer** also releases: its private tree as soon as
it starts (half its budget), then, once it holds every tree, its synthetic records (the other
half) labelled by the majority of all trees, its own included. Both releases are recorded on the
sharer's :class:`~marketplace.privacy.accountant.PrivacyLedger`.

Only private releases leave a sharer: its rows never appear in a message.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds_pfds import PfdsData, PfdsPhase, PfdsSharedData, PfdsSharedTree, PfdsTree
from marketplace.privacy.accountant import PrivacyLedger
from marketplace.privacy.neighbouring import Neighbouring, add_remove_one, replace_one
from marketplace.protocols.pfds import ClassLabels, MalformedPlain, PrivateTree, PublicSchema, ledger_steps, share_data, share_predictor
from marketplace.protocols.pfds.models import Fitted, fit_model
from marketplace.protocols.pfds.tree import PLAIN_FORMAT, PLAIN_VERSION
from marketplace.roles import CURATOR, Role, Send

TREE_FIELDS = ("attribute", "threshold", "n_children", "counts", "h_max", "t", "neighbours", "spends")


def tree_fields(tree: PrivateTree) -> dict[str, Any]:
    """The message fields of a tree (``pfds_tree`` / ``pfds_shared_tree``)."""
    return {"attribute": tree.attribute, "threshold": tree.threshold, "n_children": tree.n_children,
            "counts": tree.counts, "h_max": tree.h_max, "t": tree.t, "neighbours": tree.neighbours,
            "spends": tuple(spend.to_plain() for spend in tree.spends)}


def tree_from_body(body: PfdsTree | PfdsSharedTree, schema: PublicSchema) -> PrivateTree:
    """Rebuild a received tree against the receiver's own public schema; :class:`MalformedPlain`
    names the first field that does not make a valid tree."""
    threshold = [None if math.isnan(v) else v for v in body.threshold.tolist()]
    plain = {"format": PLAIN_FORMAT, "version": PLAIN_VERSION, "schema": schema.to_plain(), "h_max": body.h_max,
             "t": body.t, "neighbours": body.neighbours, "spends": [dict(s) for s in body.spends],
             "attribute": body.attribute.tolist(), "threshold": threshold, "n_children": body.n_children.tolist(),
             "counts": body.counts.ravel().tolist()}
    if body.counts.ndim != 2 or body.counts.shape[1] != schema.n_codes:
        raise MalformedPlain("$.counts", f"leaves x {schema.n_codes} label codes", f"shape {list(body.counts.shape)}")
    return PrivateTree.from_plain(plain, schema=schema)


def check_records(X: np.ndarray, y: np.ndarray, schema: PublicSchema, who: str) -> str | None:
    """Why labelled synthetic records do not fit the public schema, or None."""
    try:
        schema.check_rows(X, "X", f"the records of {who}", allow_empty=True)
        labels = y
        if isinstance(schema.label, ClassLabels):
            labels = y.astype(np.int64)
            if not np.array_equal(labels, y):
                return "class labels must be integers"
        schema.encode_labels(labels)
    except (TypeError, ValueError) as err:
        return str(err)
    return None



def pfds_relation(neighbours: str, record: str) -> Neighbouring:
    """The ledger's relation for ``pfds.neighbours``: add_remove (the paper's) or replace."""
    return add_remove_one(record) if neighbours == "add_remove" else replace_one(record)

class PfdsAgent(Role):
    """What every agent does: collect the forwarded trees and datasets, then train and keep its model."""

    def __init__(self, *, party_id: str, scenario_name: str, schema: PublicSchema, sharers: tuple[str, ...],
                 X: np.ndarray, y: np.ndarray, model: str, model_seed: int) -> None:
        super().__init__()
        self.party_id = party_id
        self.scenario_name = scenario_name
        self.schema = schema
        self.sharers = sharers
        self.X = np.asarray(X, dtype=np.float64)
        self.y = np.asarray(y)
        self.model = model
        self.model_seed = model_seed
        self.trees: dict[str, PrivateTree] = {}
        self.datasets: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.fitted: Fitted | None = None
        self.to_train: list[tuple[np.ndarray, np.ndarray]] | None = None
        self.phase = "trees"
        self.end_status = ""

    def handle(self, message: Envelope) -> list[Send]:
        kind = message.kind
        if message.sender != CURATOR:
            raise ProtocolError(party=message.sender, kind=kind, reason="an agent takes messages from the curator only")
        if kind == "pfds_shared_tree":
            return self._on_tree(message)
        if kind == "pfds_shared_data":
            return self._on_data(message)
        if kind == "pfds_phase":
            return self._on_phase(message)
        if kind == "shutdown":
            return self.acknowledge_shutdown(message)
        raise ProtocolError(party=message.sender, kind=kind, reason=f"a pfds {self.role_name} does not accept this kind")

    def _origin(self, message: Envelope, sharer: str, have: dict) -> None:
        if sharer not in self.sharers or sharer == self.party_id:
            raise ProtocolError(party=message.sender, kind=message.kind, reason=f"field 'sharer' must name another sharer "
                                f"of this run ({', '.join(self.sharers)}), got {sharer!r}")
        if sharer in have:
            raise ProtocolError(party=message.sender, kind=message.kind, reason=f"{sharer}'s release already arrived")

    def _on_tree(self, message: Envelope) -> list[Send]:
        body: PfdsSharedTree = message.body
        self._origin(message, body.sharer, self.trees)
        if self.phase != "trees":
            raise ProtocolError(party=message.sender, kind=message.kind, reason=f"no tree expected in phase {self.phase!r}")
        try:
            self.trees[body.sharer] = tree_from_body(body, self.schema)
        except MalformedPlain as err:
            raise ProtocolError(party=message.sender, kind=message.kind, reason=f"{body.sharer}'s tree: {err}") from None
        return []

    def _on_data(self, message: Envelope) -> list[Send]:
        body: PfdsSharedData = message.body
        self._origin(message, body.sharer, self.datasets)
        problem = check_records(body.X, body.y, self.schema, body.sharer)
        if problem:
            raise ProtocolError(party=message.sender, kind=message.kind, reason=f"{body.sharer}'s records: {problem}")
        self.datasets[body.sharer] = (body.X, body.y)
        return []

    def _on_phase(self, message: Envelope) -> list[Send]:
        body: PfdsPhase = message.body
        announced = set(body.sharers) - {self.party_id}
        held = set(self.trees if body.phase == "label" else self.datasets)
        if announced != held:
            raise ProtocolError(party=message.sender, kind=message.kind, reason=(
                f"phase {body.phase!r} announces releases of {sorted(announced)} but this agent holds {sorted(held)}"))
        if body.phase == "label":
            if self.phase != "trees":
                raise ProtocolError(party=message.sender, kind=message.kind, reason="labelling already started")
            self.phase = "data"
            return self.label([self.trees[s] for s in self.sharers if s in announced])
        if self.phase == "done":
            raise ProtocolError(party=message.sender, kind=message.kind, reason="training was already announced")
        self.phase = "done"
        self.to_train = [self.datasets[s] for s in self.sharers if s in announced]
        return []

    def finish(self) -> None:
        """Train once the run is over for this agent (after its ``bye``): the fit needs no message,
        and with 20+ agents fitting at once on a few cores it can outlast the heartbeat timeout."""
        if self.to_train is not None and not self.failure:
            self.train(self.to_train)
            self.to_train = None

    def label(self, trees: list[PrivateTree]) -> list[Send]:
        """The label phase: nothing to do for an agent that does not share."""
        return []

    def train(self, shared: list[tuple[np.ndarray, np.ndarray]]) -> None:
        """Fit the model on the agent's own rows plus every shared synthetic record."""
        X = np.vstack([self.X, *(x for x, _ in shared)])
        y = np.concatenate([self.y.astype(np.float64), *(labels for _, labels in shared)])
        if isinstance(self.schema.label, ClassLabels):
            y = y.astype(np.int64)
        self.fitted = fit_model(self.model, self.schema, X, y, seed=self.model_seed)
        self.shared_rows = int(X.shape[0] - self.X.shape[0])

    def result(self) -> dict[str, Any]:
        return {"rows": int(self.X.shape[0]), "trees_received": sorted(self.trees), "datasets_received": sorted(self.datasets),
                "shared_rows": getattr(self, "shared_rows", 0), "model": self.fitted.to_plain() if self.fitted else None,
                "end_status": self.end_status}


class PfdsReceiver(PfdsAgent):
    """An owner of `pfds` that does not share (``pfds.sharers`` below the number of owners): like
    the consumer, it receives every sharer's releases and trains on them with its own rows, and it
    releases nothing, so it spends no privacy."""

    role_name = "owner"

    def start(self) -> list[Send]:
        return [self.hello("pfds")]

    def result(self) -> dict[str, Any]:
        return super().result() | {"shares": False}


class PfdsSharer(PfdsAgent):
    """An owner of `pfds`: an agent that also releases a private tree and labelled synthetic records."""

    role_name = "owner"

    def __init__(self, *, epsilon: float, h_max: int, t: int, p: int, max_leaves: int, attribute_choice: str,
                 consistency: bool, neighbours: str, secure: bool, tree_seed: np.random.SeedSequence,
                 data_seed: np.random.SeedSequence, budget: float | None = None, **common: Any) -> None:
        super().__init__(**common)
        self.epsilon = epsilon
        self.params = dict(h_max=h_max, t=t, max_leaves=max_leaves, attribute_choice=attribute_choice,
                           neighbours=neighbours, secure=secure)
        self.p = p
        self.consistency = consistency
        self.secure = secure
        self.tree_rng = np.random.default_rng(tree_seed)
        self.data_rng = np.random.default_rng(data_seed)
        self.ledger = PrivacyLedger(self.party_id, neighbouring=pfds_relation(neighbours, f"a row of {self.party_id}'s data"),
                                    budget=None if budget is None else (budget, 0.0), theorem="basic")
        self.tree: PrivateTree | None = None
        self.released_rows = 0

    def start(self) -> list[Send]:
        self.tree = share_predictor(self.X, self.y, self.schema, epsilon=self.epsilon, rng=self.tree_rng, **self.params)
        for step in ledger_steps(self.tree.spends):
            self.ledger.spend(step.eps, mechanism=step.mechanism)
        return [self.hello("pfds"), Send(CURATOR, PfdsTree(**tree_fields(self.tree)))]

    def label(self, trees: list[PrivateTree]) -> list[Send]:
        labelled = share_data(self.tree, self.X, [self.tree, *trees], epsilon=self.epsilon, rng=self.data_rng, p=self.p,
                              consistency=self.consistency, secure=self.secure)
        for spend in labelled.spends[len(self.tree.spends):]:
            step = spend.to_step()
            self.ledger.spend(step.eps, mechanism=step.mechanism)
        self.released_rows = int(labelled.X.shape[0])
        y = np.asarray(labelled.y, dtype=np.float64)
        return [Send(CURATOR, PfdsData(X=labelled.X, y=y, epsilon=float(labelled.epsilon)))]

    def result(self) -> dict[str, Any]:
        out = super().result()
        out.update({"privacy": self.ledger.to_dict(), "synthetic_rows": self.released_rows,
                    "tree_leaves": self.tree.n_leaves if self.tree is not None else None})
        return out
