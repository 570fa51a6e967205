"""The curator's side of `summarize` (non-private): broadcast embeddings, collect bids, ask the best
bidder only, verify its point, grow the summary.

Phases: ``gathering`` (hellos and D_v) -> per round ``bidding`` -> ``acquiring`` -> ... ->
``closing`` (summary sent, waiting for every ``bye``). No message tells an owner who won: an owner
learns only whether it was itself asked for a point.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from marketplace.curator.ledger import ParsimonyLedger
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Bid, Hello, Point, Request, RoundOpen, Shutdown, Summary, TargetEmbedding
from marketplace.protocols.summarize import RandomFourierFeatures, bid_direction, bid_value, rff_objective_gain
from marketplace.roles import CONSUMER, CURATOR, Role, Send

log = logging.getLogger(__name__)


class SummarizeCurator(Role):
    role_name = "curator"

    def __init__(self, *, scenario_name: str, owners: tuple[str, ...], features: RandomFourierFeatures,
                 seed_set: np.ndarray, dim: int, rounds: int, verify_tolerance: float) -> None:
        super().__init__()
        self.party_id = CURATOR
        self.scenario_name = scenario_name
        self.owners = owners
        self.features = features
        self.dim = dim
        self.rounds = rounds
        self.tolerance = verify_tolerance
        self.phase = "gathering"
        self.present: set[str] = set()
        self.rank = {o: i for i, o in enumerate(owners)}  # the public tie-break order
        self.active: list[str] = list(owners)  # in id order; dropped when lost or caught cheating
        self.dropouts: dict[str, dict[str, Any]] = {}
        self.flagged: dict[str, str] = {}
        self.ledger = ParsimonyLedger()
        seed_phi = features.transform(seed_set) if len(seed_set) else np.zeros((0, features.n_features))
        self.summary_sum = seed_phi.sum(axis=0)
        self.diag_excess = float(len(seed_phi) - np.einsum("ij,ij->", seed_phi, seed_phi))
        self.q = len(seed_set)
        self.seed_size = len(seed_set)
        self.target_mean: np.ndarray | None = None
        self.validation_size = 0
        self.round = 0
        self.bids: dict[str, Bid] = {}
        self.candidates: list[str] = []
        self.asked: str | None = None
        self.direction: np.ndarray | None = None
        self.received: set[tuple[str, int]] = set()
        self.selection: list[tuple[str, int]] = []
        self.summary_X: list[np.ndarray] = []
        self.summary_y: list[int] = []
        self.value: dict[str, float] = {o: 0.0 for o in owners}
        self.lost: set[str] = set()
        self._phi_cache: tuple[Point, np.ndarray] | None = None
        self.waiting_bye: set[str] = set()
        self.end_reason = ""

    # --- role interface ------------------------------------------------------------------
    def start(self) -> list[Send]:
        return []

    def expected_peers(self) -> tuple[str, ...]:
        if self.phase == "closing":
            return tuple(sorted(self.waiting_bye))
        return (*self.active, CONSUMER)

    def handle(self, message: Envelope) -> list[Send]:
        handler = {
            "hello": self._on_hello, "validation_set": self._on_validation_set, "bid": self._on_bid,
            "point": self._on_point, "bye": self._on_bye,
        }.get(message.kind)
        if handler is None:
            raise ProtocolError(party=message.sender, kind=message.kind, reason="the curator does not accept this kind")
        return handler(message)

    def peer_lost(self, peer: str) -> list[Send]:
        self.lost.add(peer)
        if self.phase == "closing":
            self.waiting_bye.discard(peer)
            self.done = not self.waiting_bye
            return []
        if peer == CONSUMER:
            return self._close(status="failed", reason="the consumer was lost")
        if peer in self.active:
            self.active.remove(peer)
            self.bids.pop(peer, None)
            self.dropouts[peer] = {"round": self.round, "phase": self.phase}
            log.warning("owner %s dropped out in round %d (%s)", peer, self.round, self.phase)
        return self._progress_after_loss(peer)

    # --- gathering -----------------------------------------------------------------------
    def _on_hello(self, message: Envelope) -> list[Send]:
        hello: Hello = message.body
        sender = message.sender
        expected_role = "consumer" if sender == CONSUMER else "owner" if sender in self.owners else None
        if expected_role is None:
            raise ProtocolError(party=sender, kind="hello", reason=f"not a party of this run (owners: {', '.join(self.owners)}, consumer)")
        if hello.role != expected_role or hello.protocol != "summarize" or hello.scenario != self.scenario_name:
            raise ProtocolError(party=sender, kind="hello", reason=(
                f"expected role {expected_role!r}, protocol 'summarize', scenario {self.scenario_name!r}; "
                f"got role {hello.role!r}, protocol {hello.protocol!r}, scenario {hello.scenario!r}"))
        if self.phase != "gathering" or sender in self.present:
            raise ProtocolError(party=sender, kind="hello", reason="already said hello")
        self.present.add(sender)
        return self._maybe_begin()

    def _on_validation_set(self, message: Envelope) -> list[Send]:
        if message.sender != CONSUMER or self.target_mean is not None:
            raise ProtocolError(party=message.sender, kind="validation_set", reason="only the consumer sends D_v, once")
        X = message.body.X
        if X.shape[1] != self.dim or len(X) == 0:
            raise ProtocolError(party=message.sender, kind="validation_set", reason=f"expected a non-empty (m, {self.dim}) array, got {list(X.shape)}")
        self.ledger.see(CONSUMER, len(X))
        self.validation_size = len(X)
        self.target_mean = self._release_target(self.features.transform(X))
        return self._maybe_begin()

    def _release_target(self, phi: np.ndarray) -> np.ndarray:
        """g~ from h1(D_v): here the exact mean (the private curator releases h2 of it instead)."""
        return phi.mean(axis=0)

    def _release_summary(self) -> np.ndarray:
        """g_l from D_s: here the exact mean (the private curator releases h2 of it instead)."""
        return self.summary_sum / self.q if self.q else np.zeros_like(self.summary_sum)

    def _maybe_begin(self) -> list[Send]:
        everyone = set(self.active) | {CONSUMER}
        if self.phase != "gathering" or self.target_mean is None or not everyone <= self.present:
            return []
        log.info("all %d owners and the consumer are present; |D_v| = %d", len(self.active), self.validation_size)
        sends = [Send(o, TargetEmbedding(mean=self.target_mean)) for o in self.active]
        return sends + self._open_round()

    # --- rounds --------------------------------------------------------------------------
    def _open_round(self) -> list[Send]:
        if self.round >= self.rounds:
            return self._finish("all rounds done")
        if not self.active:
            return self._finish("no owner left")
        self.round += 1
        self.phase = "bidding"
        self.bids = {}
        summary_mean = self._release_summary()
        self.direction = bid_direction(self.target_mean, summary_mean, self.q)
        body = RoundOpen(round=self.round, summary_mean=summary_mean, q=self.q)
        return [Send(o, body) for o in self.active]

    def _on_bid(self, message: Envelope) -> list[Send]:
        bid: Bid = message.body
        sender = message.sender
        if sender not in self.active:
            raise ProtocolError(party=sender, kind="bid", reason="not an active owner")
        if self.phase != "bidding" or bid.round != self.round or sender in self.bids:
            raise ProtocolError(party=sender, kind="bid", reason=f"no bid expected (phase {self.phase}, round {self.round}, bid for round {bid.round})")
        self.bids[sender] = bid
        return self._maybe_choose()

    def _maybe_choose(self) -> list[Send]:
        if self.phase != "bidding" or len(self.bids) < len(self.active):
            return []
        offers = [(b.value, o) for o, b in self.bids.items() if b.available]
        if not offers:
            return self._finish("every owner has run out of points")
        # best bid first; equal bids go to the lower owner id (a fixed, public rule)
        self.candidates = [o for _, o in sorted(offers, key=lambda t: (-t[0], self.rank[t[1]]))]
        return self._ask_next()

    def _ask_next(self) -> list[Send]:
        self.candidates = [o for o in self.candidates if o in self.active]
        if not self.candidates:
            return self._open_round_again()
        self.asked = self.candidates.pop(0)
        self.phase = "acquiring"
        return [Send(self.asked, Request(round=self.round))]

    def _open_round_again(self) -> list[Send]:
        """No candidate of this round could deliver: rerun the round with the remaining owners."""
        self.round -= 1
        return self._open_round()

    def _on_point(self, message: Envelope) -> list[Send]:
        point: Point = message.body
        sender = message.sender
        if self.phase != "acquiring" or sender != self.asked or point.round != self.round:
            raise ProtocolError(party=sender, kind="point", reason="no point was requested from this owner for this round")
        self.ledger.see(sender)
        problem = self._verify(sender, point)
        if problem:
            self.flagged[sender] = problem
            self.active.remove(sender)
            self.bids.pop(sender, None)
            log.warning("owner %s flagged and excluded: %s", sender, problem)
            return self._ask_next()
        self._accept(sender, point)
        return self._open_round()

    def _sent_before(self, owner: str, row: int) -> bool:
        """Whether ``owner`` already sent this row (here: a row in the summary)."""
        return (owner, row) in self.received

    def _verify(self, owner: str, point: Point) -> str | None:
        """Why a received point cannot be accepted, or None: wrong shape, sent before, or a bid
        value (recomputed for this round's direction) that differs from the claimed one."""
        if point.x.shape != (self.dim,):
            return f"point has shape {list(point.x.shape)}, expected [{self.dim}]"
        if self._sent_before(owner, point.row):
            return f"row {point.row} was already sent in an earlier round"
        claimed = self.bids[owner].value
        actual = bid_value(self._phi(point), self.direction)
        if abs(actual - claimed) > self.tolerance * max(1.0, abs(claimed)):
            return f"round {self.round}: point's bid value {actual:.12g} does not match the claimed bid {claimed:.12g}"
        return None

    def _phi(self, point: Point) -> np.ndarray:
        """h1 of a received point, computed once per point (verification and acceptance share it)."""
        if self._phi_cache is None or self._phi_cache[0] is not point:
            self._phi_cache = (point, self.features.transform(point.x[None, :])[0])
        return self._phi_cache[1]

    def _accept(self, owner: str, point: Point) -> None:
        self._add_to_summary(owner, point.row, point.x, int(point.y), self._phi(point))

    def _add_to_summary(self, owner: str, row: int, x: np.ndarray, y: int, phi: np.ndarray) -> None:
        """Grow D_s by one verified point and credit its owner with the point's marginal gain."""
        gain = rff_objective_gain(self.target_mean, self.summary_sum, self.diag_excess, self.q, phi)
        self.value[owner] += gain
        self.summary_sum = self.summary_sum + phi
        self.diag_excess += 1.0 - float(phi @ phi)
        self.q += 1
        self.received.add((owner, row))
        self.selection.append((owner, row))
        self.summary_X.append(np.array(x, dtype=np.float64))
        self.summary_y.append(int(y))
        log.info("round %d/%d done", self.round, self.rounds)

    def _progress_after_loss(self, peer: str) -> list[Send]:
        if self.phase == "gathering":
            return self._maybe_begin()
        if self.phase == "bidding":
            return self._open_round() if not self.active else self._maybe_choose()
        if self.phase == "acquiring" and peer == self.asked:
            return self._ask_next()
        return []

    # --- ending ----------------------------------------------------------------------------
    def _finish(self, reason: str) -> list[Send]:
        summary = Summary(
            X=np.array(self.summary_X, dtype=np.float64).reshape(len(self.summary_X), self.dim),
            y=np.array(self.summary_y, dtype=np.int64),
            rounds=len(self.selection),
        )
        return [Send(CONSUMER, summary)] + self._close(status="completed", reason=reason)

    def _close(self, *, status: str, reason: str) -> list[Send]:
        self.phase = "closing"
        self.end_reason = reason
        if status == "failed":
            self.failure = reason
        targets = [p for p in (*self.owners, CONSUMER) if p not in self.lost]
        self.waiting_bye = set(targets)
        self.done = not self.waiting_bye
        return [Send(p, Shutdown(reason=reason, status=status)) for p in targets]

    def _on_bye(self, message: Envelope) -> list[Send]:
        if self.phase != "closing" or message.sender not in self.waiting_bye:
            raise ProtocolError(party=message.sender, kind="bye", reason="no shutdown was sent to this party")
        self.waiting_bye.discard(message.sender)
        self.done = not self.waiting_bye
        return []

    def result(self) -> dict[str, Any]:
        return {
            "end_reason": self.end_reason,
            "rounds_completed": len(self.selection),
            "parsimony": self.ledger.report(len(self.selection), self.validation_size),
            "selection": [[o, r] for o, r in self.selection],
            "value": {o: self.value[o] for o in self.owners},
            "flagged": dict(self.flagged),
            "dropouts": dict(self.dropouts),
            "seed_set_size": self.seed_size,
        }
